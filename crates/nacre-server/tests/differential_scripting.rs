//! Differential tests of Lua scripting (EVAL, EVALSHA, EVAL_RO, SCRIPT): each script goes
//! to nacre-server and to redis-server 7.0, and every reply must be identical, errors
//! included (their text names the script's SHA-1 and line, the same on both).

mod common;
mod diff;

use diff::Diff;

/// A Lua prelude defining `hex(s)`, the bytes of `s` in hex.
const HEX: &str = "local function hex(s) local h = '' for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end return h end ";

fn eval(d: &mut Diff, script: &str, keys: &[&str], args: &[&str]) {
    let n = keys.len().to_string();
    let mut a: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
    a.extend(keys.iter().map(|k| k.as_bytes()));
    a.extend(args.iter().map(|k| k.as_bytes()));
    d.check(&a);
}

#[test]
fn conversions_between_lua_and_replies() {
    let Some(mut d) = Diff::start("scripting-conversions") else {
        return;
    };
    d.script(&["SET k v", "RPUSH l a b c", "HSET h f v", "SET n 10"]);
    for s in [
        "return 1",
        "return 'x'",
        "return true",
        "return false",
        "return nil",
        "return 3.99",
        "return -3.99",
        "return {1,2,3,'ciao',{1,2}}",
        "return {1,2,nil,4}",
        "return {err='My Error'}",
        "return {err='-NOTCODE x'}",
        "return redis.error_reply('My Error')",
        "return redis.error_reply('-CODE text')",
        "return redis.status_reply('FINE')",
        "return {ok='a\\r\\nb'}",
        "return _G",
        "return {double=1.5}",
        "return redis.call('get', 'k')",
        "return redis.call('get', 'missing')",
        "return redis.call('lrange', 'l', 0, -1)",
        "return redis.call('hgetall', 'h')",
        "return redis.call('incr', 'n')",
        "return redis.call('set', 'k', 'v')",
        "return redis.call('type', 'k')",
        "return type(redis.call('get', 'missing'))",
        "return type(redis.call('type', 'k'))",
        "return redis.call('type', 'k')['ok']",
        "return redis.pcall('incr', 'k')",
        "return type(redis.pcall('incr', 'k'))",
        "return redis.pcall('incr', 'k')['err']",
        "return redis.call('exists', 'k', 'missing')",
        "return redis.call('set', 'f', 3.5)",
        "return redis.call('get', 'f')",
        "return redis.call('set', 'f', 0.1)",
        "return redis.call('get', 'f')",
        "return redis.sha1hex('')",
        "return redis.sha1hex('Pizza & Mandolino')",
        "return bit.tohex(65535, -2147483648)",
        "return {bit.band(0xff, 0x0f), bit.bor(1, 2, 4), bit.bxor(5, 1), bit.bnot(0), bit.lshift(1, 4), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.tobit(2^32 + 5)}",
        "return bit.tohex(-1, 4)",
        "return tostring(0.1)",
        "return redis.REDIS_VERSION",
        "redis.setresp(3); return redis.call('hgetall', 'h')",
        "return redis.call('ping')",
        "return redis.call('echo', 'x')",
    ] {
        eval(&mut d, s, &[], &[]);
    }
    eval(
        &mut d,
        "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}",
        &["a", "b"],
        &["c", "d"],
    );
    eval(&mut d, "return redis.call('get', KEYS[1])", &["k"], &[]);
    d.finish();
}

#[test]
fn cjson_encodes_and_decodes_as_redis() {
    let Some(mut d) = Diff::start("scripting-cjson") else {
        return;
    };
    for s in [
        "return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')",
        "local t = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}') return {t.keya, t.keyb}",
        "return cjson.encode({1, 2, 'a/b', {x = 1}})",
        "return cjson.encode({})",
        "return cjson.encode({'x', nil, 'y'})",
        "return cjson.encode({[1] = 1, [20] = 2})",
        "return cjson.encode(cjson.decode('{\"a\":null}'))",
        "return cjson.encode(cjson.null)",
        "return cjson.encode(0.1)",
        "return cjson.encode(1e100)",
        "return cjson.encode(-0.5)",
        "return cjson.encode(12345678901234)",
        "return cjson.encode('tab\tquote\"back\\\\ ctl\\1')",
        "return cjson.encode(true)",
        "return cjson.encode(0/0)",
        "return cjson.encode({[true] = 1})",
        "return cjson.encode(function() end)",
        "return type(cjson.decode('null'))",
        "return cjson.decode('\"\\u00e9\"')",
        "cjson.encode_max_depth(1); local ok = pcall(cjson.encode, {{1}}); cjson.encode_max_depth(1000); return ok",
        "cjson.decode_max_depth(1); local ok = pcall(cjson.decode, '[[1]]'); cjson.decode_max_depth(1000); return ok",
        "cjson.encode_invalid_numbers(true); local ok, s = pcall(cjson.encode, {n = 1/0}); cjson.encode_invalid_numbers(false); return {tostring(ok), s}",
    ] {
        eval(&mut d, s, &[], &[]);
    }
    d.finish();
}

#[test]
fn cmsgpack_packs_and_unpacks_as_redis() {
    let Some(mut d) = Diff::start("scripting-cmsgpack") else {
        return;
    };
    for s in [
        "return hex(cmsgpack.pack(0.1))",
        "return hex(cmsgpack.pack(0.5))",
        "return hex(cmsgpack.pack(-1099511627776))",
        "return hex(cmsgpack.pack(1, -1, 127, 128, 255, 256, 65535, 65536, 4294967296, -32, -33, -129, -32769))",
        "return hex(cmsgpack.pack(true, false, nil, 'abc', string.rep('x', 40), string.rep('y', 300)))",
        "return hex(cmsgpack.pack({1, 2, 3}, {}, {a = 1}))",
        "local a = {} a[1] = a return hex(cmsgpack.pack(a))",
        "local t = cmsgpack.unpack(cmsgpack.pack({1, 'two', {3}})) return {t[1], t[2], t[3][1]}",
        "return {cmsgpack.unpack(cmsgpack.pack(1, 2, 3))}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 0)}",
        "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2, 1)}",
        "return {cmsgpack.unpack_one(cmsgpack.pack(7), 0)}",
        "return tostring(cmsgpack.unpack(cmsgpack.pack(1.5)))",
    ] {
        eval(&mut d, &format!("{HEX}{s}"), &[], &[]);
    }
    d.finish();
}

#[test]
fn struct_packs_and_unpacks_as_redis() {
    let Some(mut d) = Diff::start("scripting-struct") else {
        return;
    };
    for s in [
        "return hex(struct.pack('>I2', 258))",
        "return hex(struct.pack('<i4', -2))",
        "return hex(struct.pack('>bBhHlL', -1, 255, -2, 65535, -3, 7))",
        "return hex(struct.pack('>d', 1.5))",
        "return hex(struct.pack('<f', 0.25))",
        "return hex(struct.pack('c3s', 'abcdef', 'xy'))",
        "return hex(struct.pack('!4 b i4', 1, 2))",
        "return {struct.unpack('>I2', struct.pack('>I2', 258))}",
        "return {struct.unpack('<i4i4', struct.pack('<i4i4', -7, 9))}",
        "return {struct.unpack('s', struct.pack('s', 'hello'))}",
        "return {struct.unpack('B c0', struct.pack('B', 3) .. 'abcd')}",
        "return {struct.unpack('>I2', 'xx' .. struct.pack('>I2', 5), 3)}",
        "return struct.size('>!4 b i4 d')",
        "return struct.size('c10')",
        "return struct.size('s')",
        "return struct.pack('q', 1)",
        "return struct.unpack('>I4', 'ab')",
    ] {
        eval(&mut d, &format!("{HEX}{s}"), &[], &[]);
    }
    d.finish();
}

#[test]
fn errors_and_the_sandbox() {
    let Some(mut d) = Diff::start("scripting-errors") else {
        return;
    };
    d.script(&["SET k v"]);
    for s in [
        "return redis.call('nosuch')",
        "return redis.call('get')",
        "return redis.call()",
        "return redis.call('incr', 'k')",
        "redis.call('incr', 'k')",
        "return redis.call('get', {})",
        "return pcall(redis.call, 'incr', 'k')",
        "local ok, e = pcall(redis.call, 'incr', 'k'); return e",
        "local ok, e = pcall(function() error({err='x'}) end); return e",
        "local ok, e = pcall(function() error('plain') end); return e",
        "error('boom')",
        "error({err='ERR from table'})",
        "return a",
        "a = 10",
        "local x = 1\nreturn y",
        "setmetatable(_G, {})",
        "local g = getmetatable(_G); g.__index = {}",
        "redis = function() return 1 end",
        "_G = {}",
        "redis.call = function() return 1 end",
        "bit.lshift = function() return 1 end",
        "loadfile('x')",
        "dofile('x')",
        "print('x')",
        "return loadstring(string.dump(function() return 1 end))()",
        "return ' unfinished",
        "return redis.call('eval', 'return 1', 0)",
        "return redis.call('multi')",
        "return redis.call('blpop', 'nolist', 0)",
        "return redis.log(redis.LOG_WARNING, 'from a script')",
        "return redis.log()",
        "return redis.setresp(4)",
        "return redis.set_repl(redis.REPL_ALL)",
        "return redis.set_repl(99)",
    ] {
        eval(&mut d, s, &[], &[]);
    }
    d.check(&[b"EVAL", b"return 1", b"2", b"a"]);
    d.check(&[b"EVAL", b"return 1", b"-1"]);
    d.check(&[b"EVAL", b"return 1", b"x"]);
    d.finish();
}

#[test]
fn the_script_cache_and_read_only_scripts() {
    let Some(mut d) = Diff::start("scripting-cache") else {
        return;
    };
    d.script(&[
        "SCRIPT LOAD return'cached'",
        "EVALSHA 7cb1a3bb84b0bd7b8a5d1bae0b0f2c3c5bd3a9f4 0",
        "SCRIPT EXISTS 7cb1a3bb84b0bd7b8a5d1bae0b0f2c3c5bd3a9f4 nosuch",
        "EVALSHA nosuch 0",
        "SCRIPT FLUSH",
        "SCRIPT FLUSH ASYNC",
        "SCRIPT FLUSH bad",
        "SCRIPT NOSUCH",
        "SCRIPT KILL",
        "SET k 1",
    ]);
    d.check(&[b"SCRIPT", b"LOAD", b"return redis.call('get', KEYS[1])"]);
    d.check(&[
        b"EVALSHA",
        b"e2b2dc5a4ac5b8a8ad0f4e2b9f8c0ba7f8d5b0bb",
        b"0",
    ]);
    d.check(&[b"EVAL_RO", b"return redis.call('get', KEYS[1])", b"1", b"k"]);
    d.check(&[
        b"EVAL_RO",
        b"return redis.call('set', KEYS[1], 2)",
        b"1",
        b"k",
    ]);
    d.check(&[
        b"EVAL",
        b"#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 2)",
        b"1",
        b"k",
    ]);
    d.check(&[
        b"EVAL_RO",
        b"#!lua\nreturn redis.call('get', KEYS[1])",
        b"1",
        b"k",
    ]);
    d.check(&[
        b"EVAL_RO",
        b"#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
        b"1",
        b"k",
    ]);
    d.check(&[b"EVAL", b"#!lua flags=nosuch\nreturn 1", b"0"]);
    d.check(&[b"EVAL", b"#!python\nreturn 1", b"0"]);
    d.check(&[b"EVAL", b"#!lua\nreturn 1", b"0"]);
    d.check(&[b"EVAL", b"#!lua", b"0"]);
    d.check(&[b"GET", b"k"]);
    d.finish();
}

/// SORT of a set with a constant BY (or NOSORT-like) inside a script answers in ALPHA
/// order, as Redis sorts what would otherwise come out in a set's arbitrary order; lists
/// keep their own order.
#[test]
fn sort_by_a_constant_inside_a_script_is_ordered() {
    let Some(mut d) = Diff::start("scripting-sort") else {
        return;
    };
    d.script(&[
        "SADD myset a b c d e f g h i l m n o p q r s t u v z aa aaa azz",
        "RPUSH mylist z b a c",
    ]);
    eval(
        &mut d,
        "return redis.call('sort', KEYS[1], 'by', '_')",
        &["myset"],
        &[],
    );
    eval(
        &mut d,
        "return redis.call('sort', KEYS[1], 'by', '_', 'get', '#', 'get', '_:*')",
        &["myset"],
        &[],
    );
    eval(
        &mut d,
        "return redis.call('sort', KEYS[1], 'by', '_')",
        &["mylist"],
        &[],
    );
    eval(
        &mut d,
        "return redis.call('sort', KEYS[1], 'by', '_', 'desc')",
        &["myset"],
        &[],
    );
    d.finish();
}
