//! A small SVG (XML) writer that escapes every attribute value and piece of text it is given.
//!
//! Elements are written through a [`Tag`] returned by [`SvgWriter::tag`]: add attributes with
//! [`Tag::attr`], then finish it as an empty element ([`Tag::end`], or simply dropping it), as
//! an element holding escaped text ([`Tag::text`]), or as an open element ([`Tag::open`])
//! closed later by [`SvgWriter::close`]. [`SvgWriter::finish`] closes whatever is still open,
//! so the output is always well formed.
//!
//! ```
//! use nacre_bench::chart::svg::SvgWriter;
//!
//! let mut w = SvgWriter::new();
//! w.tag("svg").attr("xmlns", "http://www.w3.org/2000/svg").open();
//! w.tag("rect").attr("width", 10.0).attr("height", 2.5).end();
//! w.tag("text").attr("x", 1.0).text("a < b & c");
//! let doc = w.finish();
//! assert!(doc.contains("<rect width=\"10\" height=\"2.5\"/>"));
//! assert!(doc.contains(">a &lt; b &amp; c</text>"));
//! assert!(doc.trim_end().ends_with("</svg>"));
//! ```

use std::fmt::Write as _;

/// The SVG namespace, for the root element's `xmlns`.
pub const SVG_NS: &str = "http://www.w3.org/2000/svg";

/// `s` escaped for XML text or a quoted attribute value: `&`, `<`, `>`, `"` and `'` become
/// entities, and characters XML 1.0 does not allow (control characters other than tab, line
/// feed and carriage return; U+FFFE and U+FFFF) become U+FFFD.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

/// Appends `s` to `out`, escaped as by [`escape`].
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}

/// A coordinate or length as written into the document: rounded to two decimals, without
/// trailing zeros; `0` for NaN and infinities (which SVG cannot express).
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let mut s = format!("{:.2}", v);
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// A value that can be written as an attribute: text is escaped, numbers go through [`num`].
pub trait AttrValue {
    /// Appends the value, escaped, to `out`.
    fn write_value(&self, out: &mut String);
}

impl AttrValue for str {
    fn write_value(&self, out: &mut String) {
        escape_into(out, self);
    }
}

impl AttrValue for String {
    fn write_value(&self, out: &mut String) {
        escape_into(out, self);
    }
}

impl AttrValue for f64 {
    fn write_value(&self, out: &mut String) {
        out.push_str(&num(*self));
    }
}

impl AttrValue for usize {
    fn write_value(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl AttrValue for i32 {
    fn write_value(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl<T: AttrValue + ?Sized> AttrValue for &T {
    fn write_value(&self, out: &mut String) {
        (**self).write_value(out);
    }
}

/// Builds an SVG document element by element; see the [module docs](self).
#[derive(Debug, Default)]
pub struct SvgWriter {
    out: String,
    open: Vec<&'static str>,
}

impl SvgWriter {
    /// An empty document.
    pub fn new() -> SvgWriter {
        SvgWriter::default()
    }

    /// Starts element `name`; the returned [`Tag`] takes its attributes and says how it ends.
    /// Element and attribute names are written as given, so they must be plain XML names
    /// (they are program constants, never data).
    pub fn tag(&mut self, name: &'static str) -> Tag<'_> {
        debug_assert!(is_name(name), "bad element name {name:?}");
        self.indent();
        self.out.push('<');
        self.out.push_str(name);
        Tag {
            w: self,
            name,
            done: false,
        }
    }

    /// Closes the innermost element opened with [`Tag::open`]; does nothing if none is open.
    pub fn close(&mut self) {
        if let Some(name) = self.open.pop() {
            self.indent();
            self.out.push_str("</");
            self.out.push_str(name);
            self.out.push_str(">\n");
        }
    }

    /// How many elements are open.
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    /// Closes every open element and returns the document.
    pub fn finish(mut self) -> String {
        while !self.open.is_empty() {
            self.close();
        }
        self.out
    }

    fn indent(&mut self) {
        for _ in 0..self.open.len() {
            self.out.push(' ');
        }
    }
}

/// An element being written: its start tag is open until the `Tag` is finished. Dropping it
/// without [`Tag::text`] or [`Tag::open`] writes an empty element (`<name .../>`).
#[derive(Debug)]
pub struct Tag<'w> {
    w: &'w mut SvgWriter,
    name: &'static str,
    done: bool,
}

impl Tag<'_> {
    /// Adds attribute `key="value"`, with `value` escaped.
    pub fn attr(self, key: &'static str, value: impl AttrValue) -> Self {
        debug_assert!(is_name(key), "bad attribute name {key:?}");
        let out = &mut self.w.out;
        out.push(' ');
        out.push_str(key);
        out.push_str("=\"");
        value.write_value(out);
        out.push('"');
        self
    }

    /// Adds attribute `key="value"` when `value` is `Some`.
    pub fn attr_opt(self, key: &'static str, value: Option<impl AttrValue>) -> Self {
        match value {
            Some(v) => self.attr(key, v),
            None => self,
        }
    }

    /// Ends the element as empty: `<name .../>`.
    pub fn end(self) {}

    /// Ends the element with `text`, escaped, as its content: `<name ...>text</name>`.
    pub fn text(mut self, text: &str) {
        let out = &mut self.w.out;
        out.push('>');
        escape_into(out, text);
        out.push_str("</");
        out.push_str(self.name);
        out.push_str(">\n");
        self.done = true;
    }

    /// Leaves the element open for children, until [`SvgWriter::close`].
    pub fn open(mut self) {
        self.w.out.push_str(">\n");
        self.w.open.push(self.name);
        self.done = true;
    }
}

impl Drop for Tag<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.w.out.push_str("/>\n");
        }
    }
}

/// Whether `s` is a plain XML name (ASCII letters, digits, `-`, `_`, `:`; not starting with a
/// digit or `-`).
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}
