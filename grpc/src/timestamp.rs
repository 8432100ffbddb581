//! `google.protobuf.Timestamp` with the ProtoJSON form A2A's JSON carries:
//! RFC 3339 in UTC with a literal `Z`, and 0, 3, 6 or 9 fractional digits
//! (as the protobuf libraries write it). pbjson-types' own Timestamp writes
//! `+00:00` instead of `Z`, which A2A peers' JSON (the gateway's
//! `mapping::timestamp_out`, the SDKs) never does.
//!
//! Read as ProtoJSON allows: any RFC 3339 offset, any number of fractional
//! digits. Out of the range jiff keeps (years -9999..=9999) is an error.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

/// Seconds and nanoseconds since the Unix epoch, as the proto has them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    /// The instant, if it is a valid one (nanos in 0..1e9, as the proto
    /// requires) that jiff can hold.
    pub fn to_jiff(self) -> Result<jiff::Timestamp, String> {
        if !(0..1_000_000_000).contains(&self.nanos) {
            return Err(format!("timestamp nanos {} out of 0..1e9", self.nanos));
        }
        jiff::Timestamp::new(self.seconds, self.nanos).map_err(|e| e.to_string())
    }

    /// The ProtoJSON text of the instant.
    pub fn to_rfc3339(self) -> Result<String, String> {
        let t = self.to_jiff()?;
        Ok(match self.nanos {
            0 => format!("{t:.0}"),
            n if n % 1_000_000 == 0 => format!("{t:.3}"),
            n if n % 1_000 == 0 => format!("{t:.6}"),
            _ => format!("{t:.9}"),
        })
    }
}

impl From<jiff::Timestamp> for Timestamp {
    fn from(t: jiff::Timestamp) -> Self {
        Timestamp {
            seconds: t.as_second(),
            nanos: t.subsec_nanosecond(),
        }
    }
}

impl std::str::FromStr for Timestamp {
    type Err = jiff::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<jiff::Timestamp>().map(Timestamp::from)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.to_rfc3339().map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse()
            .map_err(|e| de::Error::custom(format!("timestamp {s:?} is not RFC 3339: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(s: &str) -> String {
        let t: Timestamp = serde_json::from_value(serde_json::json!(s)).unwrap();
        serde_json::to_value(t)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn writes_z_and_0_3_6_or_9_digits() {
        assert_eq!(
            round("2026-11-28T05:24:21.123Z"),
            "2026-11-28T05:24:21.123Z"
        );
        assert_eq!(round("2026-11-28T05:24:21Z"), "2026-11-28T05:24:21Z");
        assert_eq!(round("2026-11-28T05:24:21.000Z"), "2026-11-28T05:24:21Z");
        assert_eq!(round("2026-11-28T05:24:21.12Z"), "2026-11-28T05:24:21.120Z");
        assert_eq!(
            round("2026-11-28T05:24:21.000001Z"),
            "2026-11-28T05:24:21.000001Z"
        );
        assert_eq!(
            round("2026-11-28T05:24:21.000000001Z"),
            "2026-11-28T05:24:21.000000001Z"
        );
        assert_eq!(
            round("2026-11-28T07:24:21.5+02:00"),
            "2026-11-28T05:24:21.500Z"
        );
    }

    #[test]
    fn bad_text_is_an_error_not_a_panic() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-28 05:24:21",
        ] {
            let r: Result<Timestamp, _> = serde_json::from_value(serde_json::json!(bad));
            assert!(r.is_err(), "{bad}");
        }
        let r: Result<Timestamp, _> = serde_json::from_value(serde_json::json!(12));
        assert!(r.is_err());
        // Out of range on the way out: an error, not a panic.
        let far = Timestamp {
            seconds: i64::MAX,
            nanos: 0,
        };
        assert!(serde_json::to_value(far).is_err());
        assert!(serde_json::to_value(Timestamp {
            seconds: 0,
            nanos: -1
        })
        .is_err());
    }
}
