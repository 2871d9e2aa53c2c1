//! Geo commands against redis-server 7.0: the same session gives the same replies, byte for
//! byte (scores, positions to 17 decimals, distances, geohashes, errors).

mod common;

use common::{RedisServer, Server};
use redis::Connection;

use common::run_text as run;

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
    // A grid of points around Palermo, and some near the antimeridian and a pole.
    let mut grid = vec!["GEOADD".to_string(), "grid".to_string()];
    for i in 0..20 {
        for j in 0..20 {
            grid.push(format!("{}", 12.5 + f64::from(i) * 0.1));
            grid.push(format!("{}", 37.5 + f64::from(j) * 0.07));
            grid.push(format!("p{i}-{j}"));
        }
    }
    for (k, (lon, lat)) in [
        (179.99, 10.0),
        (-179.99, 10.0),
        (179.5, 10.2),
        (0.0, 84.9),
        (90.0, 84.95),
    ]
    .iter()
    .enumerate()
    {
        grid.push(lon.to_string());
        grid.push(lat.to_string());
        grid.push(format!("edge{k}"));
    }
    let mut cmd = redis::cmd(&grid[0]);
    for a in &grid[1..] {
        cmd.arg(a);
    }
    let n: i64 = cmd.query(c).unwrap();
    out.push(format!("grid {n}"));
    let searches: &[&[&str]] = &[
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13.361389",
            "38.115556",
            "BYRADIUS",
            "20",
            "km",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13.361389",
            "38.115556",
            "BYRADIUS",
            "20",
            "km",
            "ASC",
            "WITHDIST",
            "WITHCOORD",
            "WITHHASH",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMMEMBER",
            "p5-5",
            "BYBOX",
            "30",
            "20",
            "km",
            "DESC",
            "WITHDIST",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMMEMBER",
            "p5-5",
            "BYBOX",
            "30",
            "20",
            "km",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "200",
            "mi",
            "COUNT",
            "7",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "200",
            "mi",
            "COUNT",
            "7",
            "ANY",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "5000",
            "km",
            "COUNT",
            "3",
            "DESC",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "180",
            "10",
            "BYRADIUS",
            "100",
            "km",
            "WITHDIST",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "45",
            "85",
            "BYRADIUS",
            "3000",
            "km",
            "WITHDIST",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "0",
            "m",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMMEMBER",
            "nosuch",
            "BYRADIUS",
            "1",
            "km",
        ],
        &["GEOSEARCH", "grid", "BYRADIUS", "1", "km"],
        &["GEOSEARCH", "grid", "FROMLONLAT", "13", "38"],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "km",
            "BYBOX",
            "1",
            "1",
            "km",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "-1",
            "km",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYBOX",
            "-1",
            "1",
            "km",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "parsec",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "km",
            "ANY",
        ],
        &[
            "GEOSEARCH",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "km",
            "COUNT",
            "0",
        ],
        &[
            "GEOSEARCH",
            "nosuchkey",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "km",
        ],
        &[
            "GEOSEARCHSTORE",
            "dst",
            "grid",
            "FROMLONLAT",
            "13.361389",
            "38.115556",
            "BYRADIUS",
            "15",
            "km",
        ],
        &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
        &[
            "GEOSEARCHSTORE",
            "dst",
            "grid",
            "FROMLONLAT",
            "13.361389",
            "38.115556",
            "BYRADIUS",
            "15",
            "km",
            "STOREDIST",
            "COUNT",
            "4",
        ],
        &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
        &[
            "GEOSEARCHSTORE",
            "dst",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "m",
        ],
        &["EXISTS", "dst"],
        &[
            "GEOSEARCHSTORE",
            "dst",
            "grid",
            "FROMLONLAT",
            "13",
            "38",
            "BYRADIUS",
            "1",
            "km",
            "WITHDIST",
        ],
        &[
            "GEORADIUS",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "WITHDIST",
            "ASC",
        ],
        &[
            "GEORADIUS",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "STORE",
            "st",
        ],
        &["ZRANGE", "st", "0", "-1", "WITHSCORES"],
        &[
            "GEORADIUS",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "STOREDIST",
            "st",
        ],
        &["ZRANGE", "st", "0", "-1", "WITHSCORES"],
        &[
            "GEORADIUS",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "STORE",
            "st",
            "WITHDIST",
        ],
        &[
            "GEORADIUS_RO",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "STORE",
            "st",
        ],
        &[
            "GEORADIUS_RO",
            "grid",
            "13.361389",
            "38.115556",
            "10",
            "km",
            "COUNT",
            "2",
        ],
        &["GEORADIUSBYMEMBER", "grid", "p3-3", "12", "km"],
        &[
            "GEORADIUSBYMEMBER_RO",
            "grid",
            "p3-3",
            "12",
            "km",
            "WITHCOORD",
            "DESC",
        ],
        &["GEORADIUSBYMEMBER", "grid", "nosuch", "12", "km"],
        &[
            "GEORADIUSBYMEMBER",
            "nosuchkey",
            "x",
            "12",
            "km",
            "STORE",
            "st",
        ],
        &["EXISTS", "st"],
        &["GEORADIUS", "grid", "200", "38", "10", "km"],
        &["GEORADIUS", "str", "13", "38", "10", "km"],
    ];
    for args in searches.iter().chain(script) {
        out.push(run(c, args));
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
