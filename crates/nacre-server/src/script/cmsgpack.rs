//! `cmsgpack`, as lua-cmsgpack (which Redis loads) packs and unpacks MessagePack: integers
//! in their smallest encoding, other numbers as float32 when exact else float64, strings as
//! str, tables with keys 1..n as arrays and others as maps, nesting past 16 levels as nil.

use mlua::{Lua, MultiValue, Table, Value};

/// Deeper tables are packed as nil (lua-cmsgpack's limit; it also stops cycles).
const MAX_NESTING: usize = 16;

fn fail(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

fn pack_int(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        let u = i as u64;
        if u < 128 {
            out.push(u as u8);
        } else if u <= 0xff {
            out.extend_from_slice(&[0xcc, u as u8]);
        } else if u <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(u as u16).to_be_bytes());
        } else if u <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(u as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&u.to_be_bytes());
        }
    } else if i >= -32 {
        out.push(i as i8 as u8);
    } else if i >= -128 {
        out.extend_from_slice(&[0xd0, i as i8 as u8]);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

fn pack_number(out: &mut Vec<u8>, n: f64) {
    if n.is_finite() && n == n.trunc() && n.abs() < 9.2e18 {
        return pack_int(out, n as i64);
    }
    if f64::from(n as f32) == n || n.is_nan() {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_len(
    out: &mut Vec<u8>,
    n: usize,
    fix: u8,
    fix_max: usize,
    w8: Option<u8>,
    w16: u8,
    w32: u8,
) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if let Some(c) = w8.filter(|_| n <= 0xff) {
        out.extend_from_slice(&[c, n as u8]);
    } else if n <= 0xffff {
        out.push(w16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(w32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// The length of `t` if its keys are exactly 1..n.
fn array_len(t: &Table) -> mlua::Result<Option<usize>> {
    let (mut count, mut max) = (0usize, 0usize);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let idx = match k {
            Value::Integer(i) if i >= 1 => i as usize,
            Value::Number(n) if n >= 1.0 && n == n.trunc() => n as usize,
            _ => return Ok(None),
        };
        count += 1;
        max = max.max(idx);
    }
    Ok((count == max).then_some(count))
}

fn pack(out: &mut Vec<u8>, v: &Value, level: usize) -> mlua::Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(out, *i),
        Value::Number(n) => pack_number(out, *n),
        Value::String(s) => {
            let b = s.as_bytes();
            pack_len(out, b.len(), 0xa0, 31, Some(0xd9), 0xda, 0xdb);
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_NESTING => match array_len(t)? {
            Some(n) => {
                pack_len(out, n, 0x90, 15, None, 0xdc, 0xdd);
                for i in 1..=n {
                    pack(out, &t.raw_get::<Value>(i)?, level + 1)?;
                }
            }
            None => {
                // Counted, then walked again: holding every pair at once would keep a
                // reference per key and value alive, more than Lua's stack takes.
                let mut n = 0;
                for pair in t.pairs::<Value, Value>() {
                    pair?;
                    n += 1;
                }
                pack_len(out, n, 0x80, 15, None, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pack(out, &k, level + 1)?;
                    pack(out, &v, level + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

/// Reads MessagePack values from a byte string.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> mlua::Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| fail("Missing bytes in input."))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> mlua::Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> mlua::Result<Value> {
        if depth > 1000 {
            return Err(fail("Too many nested data structures."));
        }
        let c = self.take(1)?[0];
        let num = |n: f64| Ok(Value::Number(n));
        match c {
            0x00..=0x7f => num(f64::from(c)),
            0x80..=0x8f => self.map(lua, usize::from(c & 0x0f), depth),
            0x90..=0x9f => self.array(lua, usize::from(c & 0x0f), depth),
            0xa0..=0xbf => self.string(lua, usize::from(c & 0x1f)),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(lua, n)
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(lua, n)
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(lua, n)
            }
            0xca => {
                let b: [u8; 4] = self
                    .take(4)?
                    .try_into()
                    .map_err(|_| fail("Bad data format in input."))?;
                num(f64::from(f32::from_be_bytes(b)))
            }
            0xcb => {
                let b: [u8; 8] = self
                    .take(8)?
                    .try_into()
                    .map_err(|_| fail("Bad data format in input."))?;
                num(f64::from_be_bytes(b))
            }
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(lua, n, depth)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(lua, n, depth)
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(lua, n, depth)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(lua, n, depth)
            }
            0xe0..=0xff => num(f64::from(c as i8)),
            _ => Err(fail("Bad data format in input.")),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> mlua::Result<Value> {
        Ok(Value::String(lua.create_string(self.take(n)?)?))
    }

    fn array(&mut self, lua: &Lua, n: usize, depth: usize) -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1 << 16), 0)?;
        for i in 1..=n {
            t.raw_set(i, self.value(lua, depth + 1)?)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize, depth: usize) -> mlua::Result<Value> {
        let t = lua.create_table()?;
        for _ in 0..n {
            let k = self.value(lua, depth + 1)?;
            let v = self.value(lua, depth + 1)?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// Unpacks up to `limit` values (0: all) of `s` from `offset`: the offset after them (-1
/// at the end) and the values.
fn unpack(lua: &Lua, s: &[u8], limit: usize, offset: usize) -> mlua::Result<(i64, Vec<Value>)> {
    if offset > s.len() {
        return Err(fail("Start offset greater than input length."));
    }
    let mut r = Reader { b: s, at: offset };
    let mut out = Vec::new();
    while r.at < s.len() && (limit == 0 || out.len() < limit) {
        out.push(r.value(lua, 0)?);
    }
    let next = if r.at >= s.len() { -1 } else { r.at as i64 };
    Ok((next, out))
}

fn int_arg(args: &MultiValue, i: usize) -> usize {
    match args.get(i) {
        Some(Value::Integer(n)) if *n > 0 => *n as usize,
        Some(Value::Number(n)) if *n > 0.0 => *n as usize,
        _ => 0,
    }
}

/// The `cmsgpack` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                return Err(fail("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for a in args.iter() {
                pack(&mut out, a, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let (_, vals) = unpack(lua, &s.as_bytes(), 0, 0)?;
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return Err(fail("MessagePack unpack needs a string."));
            };
            let (next, vals) = unpack(lua, &s.as_bytes(), 1, int_arg(&args, 1))?;
            Ok(MultiValue::from_iter(
                std::iter::once(Value::Integer(next)).chain(vals),
            ))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(s)) = args.front() else {
                return Err(fail("MessagePack unpack needs a string."));
            };
            let (next, vals) = unpack(lua, &s.as_bytes(), int_arg(&args, 1), int_arg(&args, 2))?;
            Ok(MultiValue::from_iter(
                std::iter::once(Value::Integer(next)).chain(vals),
            ))
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}
