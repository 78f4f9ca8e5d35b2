//! A CPU profile of the `pprof` crate as a gzip'd `perftools.profiles.Profile`
//! protobuf (github.com/google/pprof `proto/profile.proto`), the format of Go's
//! `/debug/pprof/profile`: sample types `samples/count` and `cpu/nanoseconds`, one
//! location per function (its inlined frames are separate locations), a `thread`
//! label per sample. Written by hand — the message is small, and the `pprof` crate's
//! own encoders pull in a protobuf code generator.

use flate2::Compression;
use flate2::write::GzEncoder;
use std::collections::HashMap;
use std::io::Write;

// Field numbers of profile.proto.
const PROFILE_SAMPLE_TYPE: u32 = 1;
const PROFILE_SAMPLE: u32 = 2;
const PROFILE_LOCATION: u32 = 4;
const PROFILE_FUNCTION: u32 = 5;
const PROFILE_STRING_TABLE: u32 = 6;
const PROFILE_TIME_NANOS: u32 = 9;
const PROFILE_DURATION_NANOS: u32 = 10;
const PROFILE_PERIOD_TYPE: u32 = 11;
const PROFILE_PERIOD: u32 = 12;

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.0.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.0.push(value as u8);
    }

    /// A varint field (wire type 0); zero is the default and left out.
    fn int(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(value as u64);
        }
    }

    /// A length-delimited field (wire type 2).
    fn bytes(&mut self, field: u32, value: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(value.len() as u64);
        self.0.extend_from_slice(value);
    }

    /// A packed repeated varint field.
    fn packed(&mut self, field: u32, values: impl IntoIterator<Item = i64>) {
        let mut packed = Message::default();
        for value in values {
            packed.varint(value as u64);
        }
        if !packed.0.is_empty() {
            self.bytes(field, &packed.0);
        }
    }
}

/// The string table: index 0 is the empty string.
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn id(&mut self, value: &str) -> i64 {
        if let Some(id) = self.index.get(value) {
            return *id;
        }
        let id = self.table.len() as i64;
        self.table.push(value.to_string());
        self.index.insert(value.to_string(), id);
        id
    }
}

fn value_type(strings: &mut Strings, kind: &str, unit: &str) -> Vec<u8> {
    let mut m = Message::default();
    m.int(1, strings.id(kind));
    m.int(2, strings.id(unit));
    m.0
}

/// Functions and their locations (one location per function, same id).
#[derive(Default)]
struct Functions {
    ids: HashMap<String, u64>,
    encoded: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Functions {
    fn location(&mut self, strings: &mut Strings, symbol: &::pprof::Symbol) -> u64 {
        let name = symbol.name();
        if let Some(id) = self.ids.get(&name) {
            return *id;
        }
        let id = self.encoded.len() as u64 + 1;
        let mut function = Message::default();
        function.int(1, id as i64);
        function.int(2, strings.id(&name));
        function.int(3, strings.id(&symbol.sys_name()));
        function.int(4, strings.id(&symbol.filename()));
        let mut line = Message::default();
        line.int(1, id as i64);
        line.int(2, i64::from(symbol.lineno()));
        let mut location = Message::default();
        location.int(1, id as i64);
        location.bytes(4, &line.0);
        self.ids.insert(name, id);
        self.encoded.push((function.0, location.0));
        id
    }
}

/// The report as gzip'd protobuf.
pub fn cpu_profile(report: &::pprof::Report) -> std::io::Result<Vec<u8>> {
    let mut strings = Strings::new();
    let mut functions = Functions::default();
    let frequency = i64::from(report.timing.frequency.max(1));
    let period = 1_000_000_000 / frequency;
    let mut profile = Message::default();
    profile.bytes(
        PROFILE_SAMPLE_TYPE,
        &value_type(&mut strings, "samples", "count"),
    );
    profile.bytes(
        PROFILE_SAMPLE_TYPE,
        &value_type(&mut strings, "cpu", "nanoseconds"),
    );
    let thread_key = strings.id("thread");
    for (frames, count) in &report.data {
        let locations: Vec<i64> = frames
            .frames
            .iter()
            .flatten()
            .map(|symbol| functions.location(&mut strings, symbol) as i64)
            .collect();
        let count = *count as i64;
        let mut label = Message::default();
        label.int(1, thread_key);
        label.int(2, strings.id(&frames.thread_name_or_id()));
        let mut sample = Message::default();
        sample.packed(1, locations);
        sample.packed(2, [count, count.saturating_mul(period)]);
        sample.bytes(3, &label.0);
        profile.bytes(PROFILE_SAMPLE, &sample.0);
    }
    for (_, location) in &functions.encoded {
        profile.bytes(PROFILE_LOCATION, location);
    }
    for (function, _) in &functions.encoded {
        profile.bytes(PROFILE_FUNCTION, function);
    }
    let start = report
        .timing
        .start_time
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default();
    profile.int(PROFILE_TIME_NANOS, start);
    profile.int(
        PROFILE_DURATION_NANOS,
        report.timing.duration.as_nanos() as i64,
    );
    profile.bytes(
        PROFILE_PERIOD_TYPE,
        &value_type(&mut strings, "cpu", "nanoseconds"),
    );
    profile.int(PROFILE_PERIOD, period);
    // The string table last: every id above is in it by now.
    for value in &strings.table {
        profile.bytes(PROFILE_STRING_TABLE, value.as_bytes());
    }
    gzip(&profile.0)
}

/// Gzip, as Go's pprof handlers send profiles.
pub fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The top-level fields of a protobuf message: (field, varint or bytes).
    fn fields(mut data: &[u8]) -> Vec<(u32, Result<u64, Vec<u8>>)> {
        fn varint(data: &mut &[u8]) -> u64 {
            let mut value = 0u64;
            let mut shift = 0;
            loop {
                let byte = data[0];
                *data = &data[1..];
                value |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    return value;
                }
                shift += 7;
            }
        }
        let mut out = Vec::new();
        while !data.is_empty() {
            let key = varint(&mut data);
            let field = (key >> 3) as u32;
            match key & 7 {
                0 => out.push((field, Ok(varint(&mut data)))),
                2 => {
                    let len = varint(&mut data) as usize;
                    out.push((field, Err(data[..len].to_vec())));
                    data = &data[len..];
                }
                other => panic!("unexpected wire type {other}"),
            }
        }
        out
    }

    fn symbol(name: &str, line: u32) -> ::pprof::Symbol {
        ::pprof::Symbol {
            name: Some(name.as_bytes().to_vec()),
            addr: None,
            lineno: Some(line),
            filename: Some("src/x.rs".into()),
        }
    }

    #[test]
    fn a_cpu_profile_in_pprof_format() {
        let frames = ::pprof::Frames {
            frames: vec![vec![symbol("leaf", 3)], vec![symbol("main", 9)]],
            thread_name: "worker".into(),
            thread_id: 7,
            sample_timestamp: std::time::SystemTime::now(),
        };
        let mut report = ::pprof::Report {
            data: HashMap::from([(frames, 5)]),
            timing: Default::default(),
        };
        report.timing.frequency = 100;
        report.timing.duration = std::time::Duration::from_secs(2);
        let gz = cpu_profile(&report).expect("encode");
        assert_eq!(gz[..2], [0x1f, 0x8b]);
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .expect("gunzip");
        let top = fields(&raw);
        let strings: Vec<String> = top
            .iter()
            .filter(|(f, _)| *f == PROFILE_STRING_TABLE)
            .filter_map(|(_, v)| v.clone().err())
            .map(|b| String::from_utf8(b).expect("utf-8"))
            .collect();
        assert_eq!(strings[0], "");
        for s in [
            "samples",
            "count",
            "cpu",
            "nanoseconds",
            "leaf",
            "main",
            "worker",
        ] {
            assert!(
                strings.iter().any(|t| t == s),
                "{s} missing from {strings:?}"
            );
        }
        let count = |field| top.iter().filter(|(f, _)| *f == field).count();
        assert_eq!(count(PROFILE_SAMPLE), 1);
        assert_eq!(count(PROFILE_LOCATION), 2);
        assert_eq!(count(PROFILE_FUNCTION), 2);
        assert!(top.contains(&(PROFILE_PERIOD, Ok(10_000_000))));
        // The sample: locations leaf, main; values 5 samples, 50 ms.
        let sample = top
            .iter()
            .find(|(f, _)| *f == PROFILE_SAMPLE)
            .and_then(|(_, v)| v.clone().err())
            .expect("sample");
        let sample = fields(&sample);
        assert_eq!(sample[0], (1, Err(vec![1, 2])));
        let mut values = Message::default();
        values.varint(5);
        values.varint(50_000_000);
        assert_eq!(sample[1], (2, Err(values.0)));
    }
}
