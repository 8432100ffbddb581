//! A message to JSON and back, in the form the JSON-RPC binding carries.
//!
//! The one difference from pbjson's own output: `google.protobuf.Value`
//! holds every number as a double, and pbjson writes it as one (`42.0`).
//! The protobuf libraries write an integral double as an integer (`42`),
//! and so does the JSON-RPC binding for a data part's `{"count": 42}`; a
//! number that went through gRPC must reach the agent as the same JSON.
//! No other field of `a2a.proto` is a float, so every integral float of the
//! output is one of these.

use serde::{de::DeserializeOwned, Serialize};
use serde_json::{Number, Value};

/// Doubles with an integral value up to 2^53 are exact as integers.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// `m` as ProtoJSON, integral numbers as integers.
pub fn to_value<T: Serialize>(m: &T) -> Result<Value, serde_json::Error> {
    let mut v = serde_json::to_value(m)?;
    integers(&mut v);
    Ok(v)
}

/// Reads `v` as ProtoJSON into `T` (lowerCamel or proto names, enum names or
/// numbers, unknown members skipped).
pub fn from_value<T: DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
    serde_json::from_value(v)
}

fn integers(v: &mut Value) {
    match v {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f.fract() == 0.0 && f.abs() <= EXACT_INT {
                    // In range and integral: the cast is exact.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *n = Number::from(i);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integers),
        Value::Object(members) => members.values_mut().for_each(integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integral_doubles_become_integers_and_others_stay() {
        let v: pbjson_types::Value = serde_json::from_value(
            json!({"n": 42, "f": 1.5, "neg": -3, "big": 1e300, "l": [0, 2.25]}),
        )
        .unwrap();
        assert_eq!(
            to_value(&v).unwrap(),
            json!({"n": 42, "f": 1.5, "neg": -3, "big": 1e300, "l": [0, 2.25]})
        );
        assert_eq!(serde_json::to_value(&v).unwrap()["n"], json!(42.0));
    }
}
