//! `cjson`, as lua-cjson (which Redis loads) encodes and decodes: tables with only positive
//! integer keys are arrays (holes as null, an excessively sparse one refused), other tables
//! objects with string or number keys, an empty table `{}`, `/` escaped, numbers as `%.14g`,
//! NaN and infinities refused unless allowed; `cjson.null` is a null light userdata.

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::libs::located;

/// The encoder's and decoder's settings (per interpreter, as lua-cjson's are per module).
struct Settings {
    encode_max_depth: Cell<usize>,
    decode_max_depth: Cell<usize>,
    /// 0: refuse NaN and infinities; 1: write them as `nan`/`inf`; 2: write them as null.
    invalid_numbers: Cell<u8>,
    precision: Cell<usize>,
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn fail(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

fn number_text(n: f64, s: &Settings) -> mlua::Result<String> {
    if n.is_finite() {
        if n == n.trunc() && n.abs() < 1e15 {
            return Ok(format!("{}", n as i64));
        }
        return Ok(super::vm::fmt_g(n, s.precision.get()));
    }
    match s.invalid_numbers.get() {
        0 => Err(fail(
            "Cannot serialise number: must not be NaN or Inf".into(),
        )),
        1 => Ok(if n.is_nan() {
            "nan".into()
        } else if n > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }),
        _ => Ok("null".into()),
    }
}

fn string_json(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    for &c in b {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

fn encode(out: &mut Vec<u8>, v: &Value, s: &Settings, depth: usize) -> mlua::Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => out.extend_from_slice(number_text(*n, s)?.as_bytes()),
        Value::String(st) => string_json(out, &st.as_bytes()),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > s.encode_max_depth.get() {
                return Err(fail(format!(
                    "Cannot serialise, excessive nesting ({depth})"
                )));
            }
            encode_table(out, t, s, depth)?;
        }
        other => {
            return Err(fail(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn encode_table(out: &mut Vec<u8>, t: &Table, s: &Settings, depth: usize) -> mlua::Result<()> {
    let mut max: usize = 0;
    let mut items = 0usize;
    let mut array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        items += 1;
        let idx = match k {
            Value::Integer(i) if i >= 1 => Some(i as usize),
            Value::Number(n) if n >= 1.0 && n == n.trunc() => Some(n as usize),
            _ => None,
        };
        match idx {
            Some(i) => max = max.max(i),
            None => array = false,
        }
    }
    if array && items > 0 {
        if max > items * 2 && max > 10 {
            return Err(fail(
                "Cannot serialise table: excessively sparse array".into(),
            ));
        }
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            encode(out, &t.raw_get::<Value>(i)?, s, depth)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    let mut first = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &k {
            Value::String(st) => string_json(out, &st.as_bytes()),
            Value::Integer(i) => string_json(out, i.to_string().as_bytes()),
            Value::Number(n) => string_json(out, number_text(*n, s)?.as_bytes()),
            other => {
                return Err(fail(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    other.type_name()
                )))
            }
        }
        out.push(b':');
        encode(out, &v, s, depth)?;
    }
    out.push(b'}');
    Ok(())
}

fn decode(lua: &Lua, v: &serde_json::Value, s: &Settings, depth: usize) -> mlua::Result<Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => null(),
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        J::String(st) => Value::String(lua.create_string(st)?),
        J::Array(_) | J::Object(_) if depth + 1 > s.decode_max_depth.get() => {
            return Err(fail(format!(
                "Found too many nested data structures ({}) at character 1",
                depth + 1
            )))
        }
        J::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.iter().enumerate() {
                t.raw_set(i + 1, decode(lua, it, s, depth + 1)?)?;
            }
            Value::Table(t)
        }
        J::Object(m) => {
            let t = lua.create_table_with_capacity(0, m.len())?;
            for (k, it) in m {
                t.raw_set(lua.create_string(k)?, decode(lua, it, s, depth + 1)?)?;
            }
            Value::Table(t)
        }
    })
}

/// A setting's argument: a number (`encode_max_depth(5)`) or none (query only).
fn int_arg(args: &MultiValue) -> Option<usize> {
    match args.front() {
        Some(Value::Integer(i)) if *i > 0 => Some(*i as usize),
        Some(Value::Number(n)) if *n >= 1.0 => Some(*n as usize),
        _ => None,
    }
}

/// The `cjson` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let s = Rc::new(Settings {
        encode_max_depth: Cell::new(1000),
        decode_max_depth: Cell::new(1000),
        invalid_numbers: Cell::new(0),
        precision: Cell::new(14),
    });
    let t = lua.create_table()?;
    {
        let s = s.clone();
        t.set(
            "encode",
            lua.create_function(move |lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(fail(
                        "bad argument #1 to 'encode' (expected 1 argument)".into(),
                    ));
                }
                let mut out = Vec::new();
                encode(&mut out, &args[0], &s, 0).map_err(|e| located(lua, e))?;
                lua.create_string(out)
            })?,
        )?;
    }
    {
        let s = s.clone();
        t.set(
            "decode",
            lua.create_function(move |lua, text: mlua::LuaString| {
                let v: serde_json::Value =
                    serde_json::from_slice(&text.as_bytes()).map_err(|e| {
                        located(
                            lua,
                            fail(format!(
                                "Expected value but found invalid token at character {}",
                                e.column()
                            )),
                        )
                    })?;
                decode(lua, &v, &s, 0).map_err(|e| located(lua, e))
            })?,
        )?;
    }
    let setting = |get: fn(&Settings) -> usize, set: fn(&Settings, usize)| {
        let s = s.clone();
        lua.create_function(move |_, args: MultiValue| {
            if let Some(n) = int_arg(&args) {
                set(&s, n);
            }
            Ok(get(&s) as i64)
        })
    };
    t.set(
        "encode_max_depth",
        setting(
            |s| s.encode_max_depth.get(),
            |s, n| s.encode_max_depth.set(n),
        )?,
    )?;
    t.set(
        "decode_max_depth",
        setting(
            |s| s.decode_max_depth.get(),
            |s, n| s.decode_max_depth.set(n),
        )?,
    )?;
    t.set(
        "encode_number_precision",
        setting(
            |s| s.precision.get(),
            |s, n| s.precision.set(n.clamp(1, 14)),
        )?,
    )?;
    {
        let s = s.clone();
        t.set(
            "encode_invalid_numbers",
            lua.create_function(move |lua, args: MultiValue| {
                match args.front() {
                    Some(Value::Boolean(b)) => s.invalid_numbers.set(u8::from(*b)),
                    Some(Value::String(st)) if &*st.as_bytes() == b"null" => {
                        s.invalid_numbers.set(2)
                    }
                    Some(Value::String(st)) if &*st.as_bytes() == b"on" => s.invalid_numbers.set(1),
                    Some(Value::String(st)) if &*st.as_bytes() == b"off" => {
                        s.invalid_numbers.set(0)
                    }
                    _ => {}
                }
                Ok(match s.invalid_numbers.get() {
                    0 => Value::Boolean(false),
                    1 => Value::Boolean(true),
                    _ => Value::String(lua.create_string("null")?),
                })
            })?,
        )?;
    }
    // Accepted for compatibility: Nacre keeps no encode buffer, and decodes what JSON allows.
    t.set(
        "encode_keep_buffer",
        lua.create_function(|_, v: Option<bool>| Ok(v.unwrap_or(true)))?,
    )?;
    t.set(
        "decode_invalid_numbers",
        lua.create_function(|_, v: Option<bool>| Ok(v.unwrap_or(true)))?,
    )?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}
