//! `struct` (Roberto Ierusalimschy's library, which Redis loads): `pack`, `unpack` and
//! `size` of binary records described by a format string: `<` `>` `=` byte order, `!n`
//! alignment, `b B h H i[n] I[n] l L T` integers, `f d` floats, `c[n]` fixed strings
//! (`c0` sized by the argument, or by the number before it when unpacking), `s`
//! zero-terminated strings, `x` padding.

use mlua::{Lua, MultiValue, Table, Value};

use super::libs::located;

/// Widest integer, in bytes.
const MAX_INT: usize = 8;

fn fail(msg: String) -> mlua::Error {
    mlua::Error::RuntimeError(msg)
}

/// One parsed format option.
enum Opt {
    /// Byte order: little-endian if true.
    Order(bool),
    /// Maximum alignment.
    Align(usize),
    /// Integer of this many bytes, signed or not.
    Int(usize, bool),
    Float,
    Double,
    /// Fixed string of this many bytes (0: sized otherwise).
    Chars(usize),
    /// Zero-terminated string.
    Zstr,
    Pad,
}

/// Parses `fmt` into options.
fn parse(fmt: &[u8]) -> mlua::Result<Vec<Opt>> {
    let mut out = Vec::new();
    let mut i = 0;
    let num = |i: &mut usize, default: usize| -> usize {
        let start = *i;
        let mut n = 0usize;
        while *i < fmt.len() && fmt[*i].is_ascii_digit() {
            n = n
                .saturating_mul(10)
                .saturating_add(usize::from(fmt[*i] - b'0'));
            *i += 1;
        }
        if *i == start {
            default
        } else {
            n
        }
    };
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let opt = match c {
            b' ' => continue,
            b'<' => Opt::Order(true),
            b'>' => Opt::Order(false),
            b'=' => Opt::Order(cfg!(target_endian = "little")),
            b'!' => Opt::Align(num(&mut i, 8)),
            b'b' => Opt::Int(1, true),
            b'B' => Opt::Int(1, false),
            b'h' => Opt::Int(2, true),
            b'H' => Opt::Int(2, false),
            b'l' => Opt::Int(8, true),
            b'L' | b'T' => Opt::Int(8, false),
            b'i' | b'I' => {
                let n = num(&mut i, 4);
                if n == 0 || n > MAX_INT {
                    return Err(fail(format!(
                        "bad argument #1 to '{{}}' (integral size {n} is larger than limit of {MAX_INT})"
                    )));
                }
                Opt::Int(n, c == b'i')
            }
            b'f' => Opt::Float,
            b'd' => Opt::Double,
            b'c' => Opt::Chars(num(&mut i, 1)),
            b's' => Opt::Zstr,
            b'x' => Opt::Pad,
            other => {
                return Err(fail(format!(
                    "bad argument #1 to '{{}}' (invalid format option '{}')",
                    char::from(other)
                )))
            }
        };
        out.push(opt);
    }
    Ok(out)
}

/// Padding before a field of `size` bytes at `pos` under maximum alignment `align`.
fn gap(pos: usize, size: usize, align: usize) -> usize {
    let a = size.min(align);
    if a <= 1 || !a.is_power_of_two() {
        0
    } else {
        (a - pos % a) % a
    }
}

fn number(v: Option<&Value>, i: usize) -> mlua::Result<f64> {
    v.and_then(super::vm::number)
        .ok_or_else(|| fail(format!("bad argument #{i} to 'pack' (number expected)")))
}

fn pack(fmt: &[u8], args: &[Value]) -> mlua::Result<Vec<u8>> {
    let (mut little, mut align) = (cfg!(target_endian = "little"), 1usize);
    let mut out = Vec::new();
    let mut next = 0;
    let arg = |out_i: &mut usize| -> (Option<Value>, usize) {
        let v = args.get(*out_i).cloned();
        *out_i += 1;
        (v, *out_i + 1)
    };
    for opt in parse(fmt)? {
        match opt {
            Opt::Order(l) => little = l,
            Opt::Align(a) => align = a,
            Opt::Pad => out.push(0),
            Opt::Int(n, _) => {
                out.resize(out.len() + gap(out.len(), n, align), 0);
                let (v, i) = arg(&mut next);
                let x = number(v.as_ref(), i)?;
                let bits = if x < 0.0 { x as i64 as u64 } else { x as u64 };
                let bytes = bits.to_le_bytes();
                if little {
                    out.extend_from_slice(&bytes[..n]);
                } else {
                    out.extend(bytes[..n].iter().rev());
                }
            }
            Opt::Float | Opt::Double => {
                let size = if matches!(opt, Opt::Float) { 4 } else { 8 };
                out.resize(out.len() + gap(out.len(), size, align), 0);
                let (v, i) = arg(&mut next);
                let x = number(v.as_ref(), i)?;
                let bytes = if size == 4 {
                    let f = x as f32;
                    if little {
                        f.to_le_bytes().to_vec()
                    } else {
                        f.to_be_bytes().to_vec()
                    }
                } else if little {
                    x.to_le_bytes().to_vec()
                } else {
                    x.to_be_bytes().to_vec()
                };
                out.extend_from_slice(&bytes);
            }
            Opt::Chars(_) | Opt::Zstr => {
                let (v, i) = arg(&mut next);
                let s = v.as_ref().and_then(super::vm::lua_bytes).ok_or_else(|| {
                    fail(format!("bad argument #{i} to 'pack' (string expected)"))
                })?;
                match opt {
                    Opt::Zstr => {
                        out.extend_from_slice(&s);
                        out.push(0);
                    }
                    Opt::Chars(0) => out.extend_from_slice(&s),
                    Opt::Chars(n) => {
                        if s.len() < n {
                            return Err(fail(format!(
                                "bad argument #{i} to 'pack' (string too short)"
                            )));
                        }
                        out.extend_from_slice(&s[..n]);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(out)
}

fn unpack(lua: &Lua, fmt: &[u8], data: &[u8], start: usize) -> mlua::Result<Vec<Value>> {
    let (mut little, mut align) = (cfg!(target_endian = "little"), 1usize);
    let mut pos = start;
    let mut out: Vec<Value> = Vec::new();
    let short = || fail("bad argument #2 to 'unpack' (data string too short)".into());
    for opt in parse(fmt)? {
        match opt {
            Opt::Order(l) => little = l,
            Opt::Align(a) => align = a,
            Opt::Pad => pos += 1,
            Opt::Int(n, signed) => {
                pos += gap(pos, n, align);
                let b = data.get(pos..pos + n).ok_or_else(short)?;
                let mut v: u64 = 0;
                for k in 0..n {
                    let byte = if little { b[n - 1 - k] } else { b[k] };
                    v = (v << 8) | u64::from(byte);
                }
                let x = if signed && n < 8 && v >> (n * 8 - 1) & 1 == 1 {
                    (v | (!0u64 << (n * 8))) as i64 as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                out.push(Value::Number(x));
                pos += n;
            }
            Opt::Float | Opt::Double => {
                let size = if matches!(opt, Opt::Float) { 4 } else { 8 };
                pos += gap(pos, size, align);
                let b = data.get(pos..pos + size).ok_or_else(short)?;
                let x = if size == 4 {
                    let a: [u8; 4] = b.try_into().map_err(|_| short())?;
                    f64::from(if little {
                        f32::from_le_bytes(a)
                    } else {
                        f32::from_be_bytes(a)
                    })
                } else {
                    let a: [u8; 8] = b.try_into().map_err(|_| short())?;
                    if little {
                        f64::from_le_bytes(a)
                    } else {
                        f64::from_be_bytes(a)
                    }
                };
                out.push(Value::Number(x));
                pos += size;
            }
            Opt::Chars(n) => {
                // c0: the length is the number unpacked just before.
                let n = if n == 0 {
                    match out.pop() {
                        Some(Value::Number(x)) if x >= 0.0 => x as usize,
                        _ => return Err(fail("format 'c0' needs a previous size".into())),
                    }
                } else {
                    n
                };
                let b = data.get(pos..pos + n).ok_or_else(short)?;
                out.push(Value::String(lua.create_string(b)?));
                pos += n;
            }
            Opt::Zstr => {
                let rest = data.get(pos..).ok_or_else(short)?;
                let end = rest
                    .iter()
                    .position(|&c| c == 0)
                    .ok_or_else(|| fail("unfinished string in data".into()))?;
                out.push(Value::String(lua.create_string(&rest[..end])?));
                pos += end + 1;
            }
        }
    }
    out.push(Value::Integer(pos as i64 + 1));
    Ok(out)
}

fn size(fmt: &[u8]) -> mlua::Result<usize> {
    let mut align = 1usize;
    let mut pos = 0usize;
    for opt in parse(fmt)? {
        match opt {
            Opt::Order(_) => {}
            Opt::Align(a) => align = a,
            Opt::Pad => pos += 1,
            Opt::Int(n, _) => pos += gap(pos, n, align) + n,
            Opt::Float => pos += gap(pos, 4, align) + 4,
            Opt::Double => pos += gap(pos, 8, align) + 8,
            Opt::Chars(0) => {
                return Err(fail(
                    "bad argument #1 to '{}' (option 'c0' has no fixed size)".into(),
                ))
            }
            Opt::Zstr => {
                return Err(fail(
                    "bad argument #1 to '{}' (option 's' has no fixed size)".into(),
                ))
            }
            Opt::Chars(n) => pos += n,
        }
    }
    Ok(pos)
}

/// `e` naming function `name` where its text leaves `{}`, with the caller's position.
fn named(lua: &Lua, e: mlua::Error, name: &str) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(m) => located(lua, fail(m.replace("{}", name))),
        other => other,
    }
}

/// The `struct` table.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let Some(Value::String(fmt)) = args.front() else {
                return Err(fail("bad argument #1 to 'pack' (string expected)".into()));
            };
            let rest: Vec<Value> = args.iter().skip(1).cloned().collect();
            let packed = pack(&fmt.as_bytes(), &rest).map_err(|e| named(lua, e, "pack"))?;
            lua.create_string(packed)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let (Some(Value::String(fmt)), Some(Value::String(data))) = (args.front(), args.get(1))
            else {
                return Err(fail("bad argument to 'unpack' (string expected)".into()));
            };
            let start = match args.get(2) {
                Some(Value::Integer(i)) if *i >= 1 => *i as usize - 1,
                Some(Value::Number(n)) if *n >= 1.0 => *n as usize - 1,
                Some(Value::Nil) | None => 0,
                _ => {
                    return Err(fail(
                        "bad argument #3 to 'unpack' (offset must be 1 or greater)".into(),
                    ))
                }
            };
            let vals = unpack(lua, &fmt.as_bytes(), &data.as_bytes(), start)
                .map_err(|e| named(lua, e, "unpack"))?;
            Ok(MultiValue::from_iter(vals))
        })?,
    )?;
    t.set(
        "size",
        lua.create_function(|lua, fmt: mlua::LuaString| {
            Ok(size(&fmt.as_bytes()).map_err(|e| named(lua, e, "size"))? as i64)
        })?,
    )?;
    Ok(t)
}
