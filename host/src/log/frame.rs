//! One record on disk: the frame around it and its payload encoding. The
//! layout is documented byte by byte in docs/log-format.md:
//!
//! ```text
//! offset  size  field
//! 0       4     length: bytes after this field and the CRC (2 + payload), u32 LE
//! 4       4     crc32c over the bytes from offset 8 to the end of the frame, u32 LE
//! 8       1     format version (FORMAT_VERSION)
//! 9       1     record type (RecordType)
//! 10      n     payload: the record in postcard encoding
//! ```
//!
//! Decoding never trusts a length before checking it against
//! [`RECORD_BYTES_MAX`] and the bytes actually present, so arbitrary input
//! can neither panic the decoder nor make it allocate without bound.

pub use super::record_type::RecordType;
use crate::protocol::group::Record;

/// The newest format version of this build's records. Version 2 added
/// `Group::bindings` (so a `GroupSnapshot` payload changed) and the
/// `AssignorBound` record; version 3 added the assignor limits, fallback
/// and member token to `GroupConfig` and `Binding`; version 4 added
/// `Group::handovers` and the `HandoverStarted` / `HandoverEnded` records;
/// version 5 added a member's endpoint and metadata, the routes promise and
/// reader token to `GroupConfig`, `Group::routes_epoch` and the
/// `MemberEndpointChanged` record; version 6 added the load settings
/// (`load_unit`, `load_half_life_ms`, `load_window_ms`,
/// `load_cooldown_ms`, `frozen`) to `GroupConfig`; version 7 added
/// `GroupConfig::labels`, `Group::shadow` and the `ShadowBound` record.
/// Frames of versions 1 to 6 are still read, and versions 4 to 6 are
/// still written (see `legacy.rs`).
pub const FORMAT_VERSION: u8 = 7;
/// The oldest format version this build still writes: the previous
/// release's, for a cluster in a rolling upgrade.
pub const FORMAT_VERSION_WRITE_MIN: u8 = 4;
/// The oldest format version still read.
pub const FORMAT_VERSION_MIN: u8 = 1;

/// Test only: set to `1`, this process also reads and writes
/// [`TEST_FORMAT_VERSION`], so that the tests can run a cluster's
/// format gating (docs/architecture.md, "Cluster mode") across a version
/// that changes nothing but its number. Never set in production.
pub const TEST_FORMAT_ENV: &str = "ASSIGND_TEST_FORMAT_VERSION_8";
/// The version [`TEST_FORMAT_ENV`] adds: version 7's payloads under the
/// next number. A build that really adds version 8 removes the test one.
pub const TEST_FORMAT_VERSION: u8 = 8;

/// The frame format versions a process reads and writes. A process reads
/// every version from [`FORMAT_VERSION_MIN`] to `read_max`, and writes any
/// from `write_min` to `write_max`: a build that adds a version still
/// writes the one before, so that a cluster keeps writing what its older
/// nodes read until every node reads the newer one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FormatSupport {
    #[serde(rename = "format_read_max")]
    pub read_max: u8,
    #[serde(rename = "format_write_min")]
    pub write_min: u8,
    #[serde(rename = "format_write_max")]
    pub write_max: u8,
}

impl FormatSupport {
    /// What the release before cluster feature levels reads and writes:
    /// a node registered without its support is counted as that.
    pub const PREVIOUS_RELEASE: FormatSupport = FormatSupport {
        read_max: 4,
        write_min: 4,
        write_max: 4,
    };

    /// This build's, or with [`TEST_FORMAT_ENV`] set, this build's plus
    /// the test version.
    pub fn current() -> FormatSupport {
        static CURRENT: std::sync::OnceLock<FormatSupport> = std::sync::OnceLock::new();
        *CURRENT.get_or_init(|| {
            if std::env::var_os(TEST_FORMAT_ENV).is_some_and(|v| v == "1") {
                FormatSupport::WITH_TEST_VERSION
            } else {
                FormatSupport::BUILD
            }
        })
    }

    /// This build's.
    pub const BUILD: FormatSupport = FormatSupport {
        read_max: FORMAT_VERSION,
        write_min: FORMAT_VERSION_WRITE_MIN,
        write_max: FORMAT_VERSION,
    };

    /// This build's plus [`TEST_FORMAT_VERSION`].
    pub const WITH_TEST_VERSION: FormatSupport = FormatSupport {
        read_max: TEST_FORMAT_VERSION,
        write_min: FORMAT_VERSION_WRITE_MIN,
        write_max: TEST_FORMAT_VERSION,
    };

    /// Whether frames of `version` can be written.
    pub fn writes(&self, version: u8) -> bool {
        (self.write_min..=self.write_max).contains(&version)
    }
}
/// Bytes before the payload.
pub const FRAME_HEADER_BYTES: usize = 10;
/// The largest payload accepted (a snapshot of a group at the core's limits
/// fits well inside).
pub const RECORD_BYTES_MAX: usize = 256 << 20;

/// Appends one framed record to `out`, at the newest version this
/// process writes (a data dir has no other reader to wait for: an older
/// binary refuses it with the reason).
pub fn encode(record: &Record, out: &mut Vec<u8>) {
    encode_at(record, FormatSupport::current().write_max, out);
}

/// Appends one framed record to `out` at format `version`, one this
/// process writes ([`FormatSupport::writes`]): a cluster's nodes write at
/// the cluster's level.
pub fn encode_at(record: &Record, version: u8, out: &mut Vec<u8>) {
    assert!(
        FormatSupport::current().writes(version),
        "format version {version} is not one this process writes; the caller checks"
    );
    // Versions 4 to 6 are today's records in their shapes; the test
    // version copies today's.
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    out.push(version);
    out.push(RecordType::of(record) as u8);
    let out = match version {
        4 => super::legacy::encode_v4(record, &mut *out),
        5 => super::legacy::encode_v5(record, &mut *out),
        6 => super::legacy::encode_v6(record, &mut *out),
        _ => postcard::to_io(record, &mut *out),
    }
    .expect("writing to a Vec cannot fail, and every record serializes");
    let length = out.len() - start - 8;
    assert!(
        length - 2 <= RECORD_BYTES_MAX,
        "a record of {length} bytes is past the log's limit; the core's limits must prevent it"
    );
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start..start + 4].copy_from_slice(&(length as u32).to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// What the bytes at some offset hold.
#[derive(Debug, PartialEq)]
// A decoded record is moved straight into the scan's list; boxing it would
// cost an allocation per record on recovery for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Decoded {
    /// A whole, valid record and the size of its frame.
    Record { record: Record, frame_bytes: usize },
    /// The bytes end inside a frame (a torn write if at the end of the log).
    Incomplete,
    /// A frame that is whole by its length but wrong: `frame_bytes` is how
    /// far its length field claims it reaches (it may lie).
    Corrupt { reason: String, frame_bytes: usize },
    /// A frame whose CRC matches, so its bytes are the ones written, that
    /// this version cannot read: a newer format version, an unknown record
    /// type, a payload that does not decode. Never a torn write, wherever it
    /// is: cutting it would drop a record some writer made durable (a
    /// downgrade would silently lose the newer version's latest records).
    Unreadable { reason: String, frame_bytes: usize },
}

/// Decodes the frame at the start of `bytes`, reading the versions this
/// process reads.
pub fn decode(bytes: &[u8]) -> Decoded {
    decode_up_to(bytes, FormatSupport::current().read_max)
}

/// Decodes the frame at the start of `bytes`, reading the versions from
/// [`FORMAT_VERSION_MIN`] to `read_max`.
pub fn decode_up_to(bytes: &[u8], read_max: u8) -> Decoded {
    if bytes.len() < 8 {
        return Decoded::Incomplete;
    }
    let length = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    let frame_bytes = 8usize.saturating_add(length);
    if !(2..=RECORD_BYTES_MAX + 2).contains(&length) {
        return Decoded::Corrupt {
            reason: format!("frame length {length} is out of range"),
            frame_bytes,
        };
    }
    if bytes.len() < frame_bytes {
        return Decoded::Incomplete;
    }
    let body = &bytes[8..frame_bytes];
    let actual = crc32c::crc32c(body);
    if actual != crc {
        return Decoded::Corrupt {
            reason: format!("CRC32C mismatch: stored {crc:08x}, computed {actual:08x}"),
            frame_bytes,
        };
    }
    if !(FORMAT_VERSION_MIN..=read_max).contains(&body[0]) {
        return Decoded::Unreadable {
            reason: if body[0] > read_max {
                format!(
                    "format version {} is newer than this assignd reads ({FORMAT_VERSION_MIN} to {read_max}): written by a newer assignd, which can read this log",
                    body[0]
                )
            } else {
                format!(
                    "format version {} is not between {FORMAT_VERSION_MIN} and {read_max}",
                    body[0]
                )
            },
            frame_bytes,
        };
    }
    record_of(body, frame_bytes)
}

/// The record a whole frame's `body` (version, type byte, payload; CRC
/// and version already checked) holds, or why this build cannot read it.
fn record_of(body: &[u8], frame_bytes: usize) -> Decoded {
    let Some(kind) = RecordType::from_byte(body[1]) else {
        return Decoded::Unreadable {
            reason: format!("unknown record type {}", body[1]),
            frame_bytes,
        };
    };
    let decoded = if body[0] >= FORMAT_VERSION {
        postcard::take_from_bytes::<Record>(&body[2..])
    } else {
        super::legacy::decode(body[0], kind, &body[2..])
    };
    match decoded {
        Ok((_, rest)) if !rest.is_empty() => Decoded::Unreadable {
            reason: format!("{} bytes after the payload", rest.len()),
            frame_bytes,
        },
        Ok((record, _)) if RecordType::of(&record) == kind => Decoded::Record {
            record,
            frame_bytes,
        },
        Ok((record, _)) => Decoded::Unreadable {
            reason: format!(
                "type byte says {} but the payload holds {}",
                kind.name(),
                RecordType::of(&record).name()
            ),
            frame_bytes,
        },
        Err(e) => Decoded::Unreadable {
            reason: format!("payload does not decode: {e}"),
            frame_bytes,
        },
    }
}
