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

/// A search area: a circle or a box around a position, its sizes in a unit of `per_unit`
/// meters (as Redis keeps them, so distances come back in the unit).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The center.
    pub lon: f64,
    /// The center.
    pub lat: f64,
    /// Meters per unit.
    pub per_unit: f64,
    /// The area's extent.
    pub extent: Extent,
}

/// A circle's radius, or a box's width and height, in the shape's unit.
#[derive(Clone, Copy, Debug)]
pub enum Extent {
    /// Within this distance of the center.
    Radius(f64),
    /// Within half the width east and west, and half the height north and south.
    Box(f64, f64),
}

/// Bounds of the Mercator projection Redis uses to pick a geohash precision.
const MERCATOR_MAX: f64 = 20_037_726.37;

/// The geohash precision (bits per coordinate) whose cells hold a search of `range` meters
/// around latitude `lat`.
fn steps_for(mut range: f64, lat: f64) -> u32 {
    if range == 0.0 {
        return STEP;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, STEP as i32) as u32
}

fn deg(rad: f64) -> f64 {
    rad / (std::f64::consts::PI / 180.0)
}

/// The shape's bounding box: (min lon, min lat, max lon, max lat).
fn bounding_box(s: &Shape) -> (f64, f64, f64, f64) {
    let (h, w) = match s.extent {
        Extent::Radius(r) => (r, r),
        Extent::Box(w, h) => (h / 2.0, w / 2.0),
    };
    let (h, w) = (h * s.per_unit, w * s.per_unit);
    let lat_d = deg(h / EARTH_RADIUS);
    let lon_top = deg(w / EARTH_RADIUS / rad(s.lat + lat_d).cos());
    let lon_bottom = deg(w / EARTH_RADIUS / rad(s.lat - lat_d).cos());
    let d = if s.lat < 0.0 { lon_bottom } else { lon_top };
    (s.lon - d, s.lat - lat_d, s.lon + d, s.lat + lat_d)
}

/// The geohash of a position at `step` bits per coordinate, on Redis's ranges.
fn encode_step(lon: f64, lat: f64, step: u32) -> u64 {
    let lat_off = (lat - LAT_MIN) / (LAT_MAX - LAT_MIN) * (1u64 << step) as f64;
    let lon_off = (lon - LON_MIN) / (LON_MAX - LON_MIN) * (1u64 << step) as f64;
    spread(lat_off as u32) | (spread(lon_off as u32) << 1)
}

/// A cell's bounds: (min lat, max lat, min lon, max lon).
fn cell(bits: u64, step: u32) -> (f64, f64, f64, f64) {
    let (ilat, ilon) = (f64::from(gather(bits)), f64::from(gather(bits >> 1)));
    let n = (1u64 << step) as f64;
    let (lat_s, lon_s) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    (
        LAT_MIN + ilat / n * lat_s,
        LAT_MIN + (ilat + 1.0) / n * lat_s,
        LON_MIN + ilon / n * lon_s,
        LON_MIN + (ilon + 1.0) / n * lon_s,
    )
}

/// The cell `d` steps east (longitude bits, the odd ones) or north (latitude bits).
fn moved(bits: u64, step: u32, east: i8, north: i8) -> u64 {
    let shift = 64 - step * 2;
    let mv = |bits: u64, d: i8, mine: u64, other: u64| -> u64 {
        if d == 0 {
            return bits;
        }
        let (x, y) = (bits & mine, bits & other);
        let zz = other >> shift;
        let x = if d > 0 {
            x.wrapping_add(zz + 1)
        } else {
            (x | zz).wrapping_sub(zz + 1)
        };
        (x & (mine >> shift)) | y
    };
    let bits = mv(bits, east, 0xaaaa_aaaa_aaaa_aaaa, 0x5555_5555_5555_5555);
    mv(bits, north, 0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa)
}

/// The score ranges `[min, max)` to search for `s`, in Redis's order (the center cell, then
/// north, south, east, west, north-east, north-west, south-east, south-west), cells that
/// cannot hold a match left out and a cell equal to the one before it skipped.
pub fn search_ranges(s: &Shape) -> Vec<(f64, f64)> {
    let (min_lon, min_lat, max_lon, max_lat) = bounding_box(s);
    let radius = match s.extent {
        Extent::Radius(r) => r,
        Extent::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    } * s.per_unit;
    let mut step = steps_for(radius, s.lat);
    let around = |step: u32| {
        let h = encode_step(s.lon, s.lat, step);
        let n = |e: i8, no: i8| moved(h, step, e, no);
        [
            h,
            n(0, 1),
            n(0, -1),
            n(1, 0),
            n(-1, 0),
            n(1, 1),
            n(-1, 1),
            n(1, -1),
            n(-1, -1),
        ]
    };
    let mut cells = around(step);
    let too_coarse = {
        let (north, south) = (cell(cells[1], step), cell(cells[2], step));
        let (east, west) = (cell(cells[3], step), cell(cells[4], step));
        north.1 < max_lat || south.0 > min_lat || east.3 < max_lon || west.2 > min_lon
    };
    if step > 1 && too_coarse {
        step -= 1;
        cells = around(step);
    }
    let mut keep = [true; 9];
    if step >= 2 {
        let (lat_lo, lat_hi, lon_lo, lon_hi) = cell(cells[0], step);
        let mut drop = |ids: [usize; 3]| ids.iter().for_each(|&i| keep[i] = false);
        if lat_lo < min_lat {
            drop([2, 7, 8]);
        }
        if lat_hi > max_lat {
            drop([1, 5, 6]);
        }
        if lon_lo < min_lon {
            drop([4, 8, 6]);
        }
        if lon_hi > max_lon {
            drop([3, 7, 5]);
        }
    }
    let shift = 52 - 2 * step;
    let mut out = Vec::new();
    // As Redis: a cell equal to the last one searched is skipped, unless that was the center.
    let mut last = 0;
    for (i, &c) in cells.iter().enumerate() {
        if !keep[i] || (last > 0 && cells[last] == c) {
            continue;
        }
        last = i;
        out.push(((c << shift) as f64, ((c + 1) << shift) as f64));
    }
    out
}

/// The distance from the shape's center to a position, in meters, if the position is in it.
pub fn within(s: &Shape, lon: f64, lat: f64) -> Option<f64> {
    match s.extent {
        Extent::Radius(r) => {
            let d = distance(s.lon, s.lat, lon, lat);
            (d <= r * s.per_unit).then_some(d)
        }
        Extent::Box(w, h) => {
            let lat_d = EARTH_RADIUS * (rad(s.lat) - rad(lat)).abs();
            if lat_d > h * s.per_unit / 2.0 {
                return None;
            }
            if distance(lon, lat, s.lon, lat) > w * s.per_unit / 2.0 {
                return None;
            }
            Some(distance(s.lon, s.lat, lon, lat))
        }
    }
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
