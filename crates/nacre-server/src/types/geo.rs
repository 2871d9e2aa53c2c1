//! Geo positions on sorted sets, as Redis 7.0 keeps them: a member's score is the 52-bit
//! geohash of its position (26 bits of longitude in [-180, 180] and 26 of latitude in
//! [-85.05112878, 85.05112878], interleaved), so scores, decoded positions and distances
//! match Redis's to the printed digit.

/// Longitude and latitude bounds Redis accepts.
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate.
const STEP: u32 = 26;
/// The Earth's radius Redis measures with, in meters.
const EARTH_RADIUS: f64 = 6_372_797.560_856;

/// Spreads the low 32 bits of `v` to the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `v`.
fn gather(v: u64) -> u32 {
    let mut x = v & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
}

/// The geohash of a position in the given latitude range (`None` outside Redis's bounds).
fn encode_in(lon: f64, lat: f64, lat_min: f64, lat_max: f64) -> Option<u64> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    let lat_off = (lat - lat_min) / (lat_max - lat_min) * f64::from(1u32 << STEP);
    let lon_off = (lon - LON_MIN) / (LON_MAX - LON_MIN) * f64::from(1u32 << STEP);
    // C's double-to-unsigned conversion truncates.
    Some(spread(lat_off as u32) | (spread(lon_off as u32) << 1))
}

/// The score of a position (`None` outside Redis's bounds).
pub fn encode(lon: f64, lat: f64) -> Option<f64> {
    encode_in(lon, lat, LAT_MIN, LAT_MAX).map(|h| h as f64)
}

/// The position a score stands for: the middle of its geohash cell, as Redis decodes it.
pub fn decode(score: f64) -> (f64, f64) {
    let bits = score as u64;
    let (ilat, ilon) = (gather(bits), gather(bits >> 1));
    let cells = f64::from(1u32 << STEP);
    let (lat_scale, lon_scale) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    let lat_lo = LAT_MIN + (f64::from(ilat) / cells) * lat_scale;
    let lat_hi = LAT_MIN + ((f64::from(ilat) + 1.0) / cells) * lat_scale;
    let lon_lo = LON_MIN + (f64::from(ilon) / cells) * lon_scale;
    let lon_hi = LON_MIN + ((f64::from(ilon) + 1.0) / cells) * lon_scale;
    let lon = ((lon_lo + lon_hi) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((lat_lo + lat_hi) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The standard 11-character geohash of the position a score stands for (re-encoded with
/// latitudes in [-90, 90], as `GEOHASH` answers).
pub fn geohash_string(score: f64) -> String {
    const ALPHABET: &[u8] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode(score);
    let bits = encode_in(lon, lat, -90.0, 90.0).unwrap_or(0);
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                ((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize
            };
            ALPHABET[idx] as char
        })
        .collect()
}

fn rad(deg: f64) -> f64 {
    deg * (std::f64::consts::PI / 180.0)
}

/// The distance in meters between two positions (haversine on Redis's sphere).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((rad(lon2) - rad(lon1)) / 2.0).sin();
    if v == 0.0 {
        return EARTH_RADIUS * (rad(lat2) - rad(lat1)).abs();
    }
    let u = ((rad(lat2) - rad(lat1)) / 2.0).sin();
    let a = u * u + rad(lat1).cos() * rad(lat2).cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// Meters per unit of a distance unit (`m`, `km`, `ft`, `mi`, any case).
pub fn unit(name: &[u8]) -> Option<f64> {
    Some(match name.to_ascii_lowercase().as_slice() {
        b"m" => 1.0,
        b"km" => 1000.0,
        b"ft" => 0.3048,
        b"mi" => 1609.34,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_within_a_cell() {
        for (lon, lat) in [
            (13.361389, 38.115556),
            (-122.27652, 37.805186),
            (0.0, 0.0),
            (180.0, 85.0),
        ] {
            let s = encode(lon, lat).unwrap();
            let (x, y) = decode(s);
            assert!(
                (x - lon).abs() < 1e-5 && (y - lat).abs() < 1e-5,
                "{lon},{lat} -> {x},{y}"
            );
            assert_eq!(encode(x, y), Some(s));
        }
        assert_eq!(encode(181.0, 0.0), None);
        assert_eq!(encode(0.0, 86.0), None);
        // Redis's own example: Palermo and Catania are 166274.1516 m apart.
        let (p, c) = (
            encode(13.361389, 38.115556).unwrap(),
            encode(15.087269, 37.502669).unwrap(),
        );
        let ((x1, y1), (x2, y2)) = (decode(p), decode(c));
        assert_eq!(format!("{:.4}", distance(x1, y1, x2, y2)), "166274.1516");
        assert_eq!(geohash_string(p), "sqc8b49rny0");
    }
}
