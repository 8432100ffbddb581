//! Free-form JSON carried inside typed messages (data parts, `metadata`,
//! error `data`). In JSON it is itself; in binary frames it travels as the
//! raw JSON text (docs/protocol.md §1, binary frames: "DataPart payloads travel as raw JSON
//! bytes"), since bincode cannot describe an arbitrary JSON tree.

use bincode::de::{BorrowDecoder, Decoder};
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{BorrowDecode, Decode, Encode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::ops::{Deref, DerefMut};

/// A JSON object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonObject(pub Map<String, Value>);

impl Deref for JsonObject {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for JsonObject {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl From<Map<String, Value>> for JsonObject {
    fn from(m: Map<String, Value>) -> Self {
        JsonObject(m)
    }
}

/// Any JSON value.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonValue(pub Value);

fn encode_json<E: Encoder, T: Serialize>(v: &T, e: &mut E) -> Result<(), EncodeError> {
    let text = serde_json::to_string(v).map_err(|err| EncodeError::OtherString(err.to_string()))?;
    text.encode(e)
}

fn decode_json<T: serde::de::DeserializeOwned>(text: String) -> Result<T, DecodeError> {
    serde_json::from_str(&text)
        .map_err(|err| DecodeError::OtherString(format!("embedded JSON: {err}")))
}

impl Encode for JsonObject {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        encode_json(&self.0, e)
    }
}

impl<C> Decode<C> for JsonObject {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        decode_json(String::decode(d)?).map(JsonObject)
    }
}

impl<'de, C> BorrowDecode<'de, C> for JsonObject {
    fn borrow_decode<D: BorrowDecoder<'de, Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        decode_json(String::borrow_decode(d)?).map(JsonObject)
    }
}

impl Encode for JsonValue {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        encode_json(&self.0, e)
    }
}

impl<C> Decode<C> for JsonValue {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        decode_json(String::decode(d)?).map(JsonValue)
    }
}

impl<'de, C> BorrowDecode<'de, C> for JsonValue {
    fn borrow_decode<D: BorrowDecoder<'de, Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        decode_json(String::borrow_decode(d)?).map(JsonValue)
    }
}
