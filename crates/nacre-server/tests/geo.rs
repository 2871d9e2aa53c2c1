//! Geo commands against redis-server 7.0: the same session gives the same replies, byte for
//! byte (scores, positions to 17 decimals, distances, geohashes, errors).

mod common;

use common::{RedisServer, Server};
use redis::Connection;

fn session(c: &mut Connection) -> Vec<String> {
    let script: &[&[&str]] = &[
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        &[
            "GEOADD",
            "Sicily",
            "NX",
            "13.0",
            "38.0",
            "Palermo",
            "14.0",
            "37.0",
            "Agrigento",
        ],
        &[
            "GEOADD", "Sicily", "XX", "CH", "13.5", "38.2", "Palermo", "1", "1", "Nowhere",
        ],
        &["GEOADD", "Sicily", "CH", "13.5", "38.2", "Palermo"],
        &[
            "GEOADD",
            "poles",
            "-180",
            "85.05112878",
            "a",
            "180",
            "-85.05112878",
            "b",
            "0",
            "0",
            "c",
        ],
        &[
            "GEOADD",
            "poles",
            "-122.27652",
            "37.805186",
            "d",
            "0.000001",
            "-0.000001",
            "e",
        ],
        &["GEOADD", "bad", "200", "100", "x"],
        &["GEOADD", "bad", "10", "10", "x", "1", "nan", "y"],
        &["GEOADD", "bad", "abc", "10", "x"],
        &["GEOADD", "bad", "10", "10"],
        &["GEOADD", "bad", "NX", "XX", "10", "10", "x"],
        &["EXISTS", "bad"],
        &[
            "GEOADD",
            "doc",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
        &["GEODIST", "doc", "Palermo", "Catania"],
        &["GEOHASH", "doc", "Palermo", "Catania"],
        &["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "poles", "0", "-1", "WITHSCORES"],
        &["GEOPOS", "Sicily", "Palermo", "Catania", "Missing"],
        &["GEOPOS", "poles", "a", "b", "c", "d", "e"],
        &["GEOPOS", "nosuchkey", "a"],
        &["GEODIST", "Sicily", "Palermo", "Catania"],
        &["GEODIST", "Sicily", "Palermo", "Catania", "km"],
        &["GEODIST", "Sicily", "Palermo", "Catania", "MI"],
        &["GEODIST", "Sicily", "Palermo", "Catania", "ft"],
        &["GEODIST", "Sicily", "Palermo", "Catania", "parsecs"],
        &["GEODIST", "Sicily", "Palermo", "Missing"],
        &["GEODIST", "Sicily", "Palermo", "Catania", "km", "extra"],
        &["GEODIST", "poles", "a", "b"],
        &["GEODIST", "poles", "c", "e"],
        &["GEOHASH", "Sicily", "Palermo", "Catania", "Missing"],
        &["GEOHASH", "poles", "a", "b", "c", "d", "e"],
        &["GEOHASH", "nosuchkey", "a"],
        &["SET", "str", "x"],
        &["GEOADD", "str", "1", "1", "m"],
        &["GEOPOS", "str", "m"],
        &["GEODIST", "str", "a", "b"],
        &["GEOHASH", "str", "m"],
    ];
    let mut out = Vec::new();
    for args in script {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let r: redis::RedisResult<redis::Value> = cmd.query(c);
        out.push(match r {
            Ok(v) => format!("{args:?} -> {v:?}"),
            Err(e) => format!("{args:?} -> error {e}"),
        });
    }
    out
}

#[test]
fn geo_commands_match_redis() {
    let nacre = Server::start(&[]);
    let ours = session(&mut nacre.conn());
    assert!(
        ours.iter().any(|l| l.contains("166274.1516")),
        "Palermo to Catania: {ours:#?}"
    );
    let Some(redis) = RedisServer::start() else {
        eprintln!("redis-server is not installed; compared with nothing");
        return;
    };
    let theirs = session(&mut redis.conn());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b, "(nacre first)");
    }
    assert_eq!(ours.len(), theirs.len());
}
