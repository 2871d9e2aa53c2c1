//! The libraries Redis loads into its interpreter beyond Lua's own: `bit` (LuaBitOp's
//! operations on 32-bit integers), `cjson` (cjson.rs), `cmsgpack` (cmsgpack.rs) and `struct`
//! (lstruct.rs).

use mlua::{Lua, MultiValue, Table, Value};

/// `e` with the position of the Lua code that called the library, as `luaL_error` words it.
pub fn located(lua: &Lua, e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(msg) => {
            let at = lua
                .inspect_stack(1, |d| {
                    let src = d.source().short_src.map(|s| s.into_owned());
                    (src, d.current_line())
                })
                .and_then(|(src, line)| Some(format!("{}:{}: ", src?, line?)))
                .unwrap_or_default();
            mlua::Error::RuntimeError(format!("{at}{msg}"))
        }
        other => other,
    }
}

/// Registers the libraries as globals of `g`.
pub fn register(lua: &Lua, g: &Table) -> mlua::Result<()> {
    g.set("bit", bit(lua)?)?;
    g.set("cjson", super::cjson::table(lua)?)?;
    g.set("cmsgpack", super::cmsgpack::table(lua)?)?;
    g.set("struct", super::lstruct::table(lua)?)?;
    Ok(())
}

/// A number argument as LuaBitOp reads it: rounded to an integer, wrapped to 32 bits.
fn tobit(v: &Value, i: usize, name: &str) -> mlua::Result<i32> {
    let n = super::vm::number(v).ok_or_else(|| bad(i, name))?;
    // LuaBitOp adds 2^52 + 2^51 and keeps the low word: round to nearest, ties to even,
    // then wrap.
    let r = n.round_ties_even();
    let wrapped = if r.is_finite() {
        (r % 4_294_967_296.0) as i64
    } else {
        0
    };
    Ok(wrapped as u32 as i32)
}

fn bad(i: usize, name: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{i} to '{name}' (number expected)"))
}

fn arg(args: &MultiValue, i: usize, name: &str) -> mlua::Result<i32> {
    tobit(args.get(i).unwrap_or(&Value::Nil), i + 1, name)
}

/// The `bit` table.
fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let unary = |f: fn(i32) -> i32, name: &'static str| {
        lua.create_function(move |_, args: MultiValue| Ok(f(arg(&args, 0, name)?)))
    };
    t.set("tobit", unary(|x| x, "tobit")?)?;
    t.set("bnot", unary(|x| !x, "bnot")?)?;
    t.set("bswap", unary(|x| x.swap_bytes(), "bswap")?)?;
    let fold = |f: fn(i32, i32) -> i32, name: &'static str| {
        lua.create_function(move |_, args: MultiValue| {
            let mut acc = arg(&args, 0, name)?;
            for i in 1..args.len() {
                acc = f(acc, arg(&args, i, name)?);
            }
            Ok(acc)
        })
    };
    t.set("band", fold(|a, b| a & b, "band")?)?;
    t.set("bor", fold(|a, b| a | b, "bor")?)?;
    t.set("bxor", fold(|a, b| a ^ b, "bxor")?)?;
    let shift = |f: fn(i32, u32) -> i32, name: &'static str| {
        lua.create_function(move |_, args: MultiValue| {
            let x = arg(&args, 0, name)?;
            let n = arg(&args, 1, name)? as u32 & 31;
            Ok(f(x, n))
        })
    };
    t.set("lshift", shift(|x, n| ((x as u32) << n) as i32, "lshift")?)?;
    t.set("rshift", shift(|x, n| ((x as u32) >> n) as i32, "rshift")?)?;
    t.set("arshift", shift(|x, n| x >> n, "arshift")?)?;
    t.set(
        "rol",
        shift(|x, n| (x as u32).rotate_left(n) as i32, "rol")?,
    )?;
    t.set(
        "ror",
        shift(|x, n| (x as u32).rotate_right(n) as i32, "ror")?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let x = arg(&args, 0, "tohex")? as u32;
            let mut n: i64 = match args.get(1) {
                None | Some(Value::Nil) => 8,
                Some(_) => i64::from(arg(&args, 1, "tohex")?),
            };
            let upper = n < 0;
            if upper {
                n = -n;
            }
            let n = n.clamp(0, 8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            lua.create_string(&full[8 - n..])
        })?,
    )?;
    Ok(t)
}
