//! Compares two descriptors of `a2a.proto` for what the wire depends on:
//! the package, every service and rpc (request and response types,
//! streaming), every message (nested and map-entry types too), every field
//! (name, number, type, type name, label, proto3 `optional`, oneof, JSON
//! name, `deprecated`) and every enum value. Comments, source positions and
//! the options that only drive code or HTTP-route generators (google.api
//! annotations, language options) are not compared: they never reach the
//! wire, and `proto/a2a.proto` leaves them out (its header says why).
//!
//! The other descriptor is the one the official Python SDK ships (its
//! `a2a_pb2` module): `gateway/sdk-tests/python/check_grpc_descriptor.py`
//! hands it to the `descriptor_check` example, so the normative file itself
//! never has to be copied here.

use std::collections::BTreeMap;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet, ServiceDescriptorProto,
};

/// The name of our file in [`crate::DESCRIPTOR_SET`], and of the
/// specification's.
pub const FILE_NAME: &str = "a2a.proto";

/// Imports of the normative file that ours leaves out: the google.api
/// annotations, which carry no wire fact.
const LEFT_OUT_IMPORTS: &str = "google/api/";

/// Our `a2a.proto`, as compiled by build.rs.
pub fn ours() -> FileDescriptorProto {
    let set = FileDescriptorSet::decode(crate::DESCRIPTOR_SET)
        .expect("build.rs wrote a valid descriptor set");
    set.file
        .into_iter()
        .find(|f| f.name() == FILE_NAME)
        .expect("the descriptor set holds a2a.proto")
}

/// Every difference on the wire between `ours` and `theirs`, one line each
/// (empty when they agree).
pub fn compare(ours: &FileDescriptorProto, theirs: &FileDescriptorProto) -> Vec<String> {
    let mut d = Diffs::default();
    d.eq("file", "package", ours.package(), theirs.package());
    d.eq("file", "syntax", ours.syntax(), theirs.syntax());
    for dep in &ours.dependency {
        if !theirs.dependency.contains(dep) {
            d.push(format!("file: imports {dep}, which theirs does not"));
        }
    }
    for dep in &theirs.dependency {
        if !ours.dependency.contains(dep) && !dep.starts_with(LEFT_OUT_IMPORTS) {
            d.push(format!("file: does not import {dep}, which theirs does"));
        }
    }
    let pkg = ours.package();
    d.services(pkg, &ours.service, &theirs.service);
    d.messages(pkg, &ours.message_type, &theirs.message_type);
    d.enums(pkg, &ours.enum_type, &theirs.enum_type);
    d.0
}

#[derive(Default)]
struct Diffs(Vec<String>);

/// Pairs the items of two lists by name; reports the names only one side has.
fn pair<'a, T>(
    d: &mut Diffs,
    what: &str,
    scope: &str,
    ours: &'a [T],
    theirs: &'a [T],
    name: impl Fn(&T) -> &str,
) -> Vec<(&'a T, &'a T)> {
    let ours: BTreeMap<&str, &T> = ours.iter().map(|t| (name(t), t)).collect();
    let theirs: BTreeMap<&str, &T> = theirs.iter().map(|t| (name(t), t)).collect();
    for n in ours.keys().filter(|n| !theirs.contains_key(*n)) {
        d.push(format!("{scope}: {what} {n} is ours only"));
    }
    for n in theirs.keys().filter(|n| !ours.contains_key(*n)) {
        d.push(format!("{scope}: {what} {n} is missing here"));
    }
    ours.iter()
        .filter_map(|(n, o)| theirs.get(n).map(|t| (*o, *t)))
        .collect()
}

impl Diffs {
    fn push(&mut self, line: String) {
        self.0.push(line);
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, scope: &str, what: &str, ours: T, theirs: T) {
        if ours != theirs {
            self.push(format!(
                "{scope}: {what} is {ours:?} here, {theirs:?} in theirs"
            ));
        }
    }

    fn services(
        &mut self,
        pkg: &str,
        ours: &[ServiceDescriptorProto],
        theirs: &[ServiceDescriptorProto],
    ) {
        for (o, t) in pair(self, "service", pkg, ours, theirs, |s| s.name()) {
            let scope = format!("service {pkg}.{}", o.name());
            for (om, tm) in pair(self, "rpc", &scope, &o.method, &t.method, |m| m.name()) {
                let scope = format!("{scope}.{}", om.name());
                self.eq(&scope, "request type", om.input_type(), tm.input_type());
                self.eq(&scope, "response type", om.output_type(), tm.output_type());
                self.eq(
                    &scope,
                    "client streaming",
                    om.client_streaming(),
                    tm.client_streaming(),
                );
                self.eq(
                    &scope,
                    "server streaming",
                    om.server_streaming(),
                    tm.server_streaming(),
                );
            }
        }
    }

    fn messages(&mut self, parent: &str, ours: &[DescriptorProto], theirs: &[DescriptorProto]) {
        for (o, t) in pair(self, "message", parent, ours, theirs, |m| m.name()) {
            let full = format!("{parent}.{}", o.name());
            let scope = format!("message {full}");
            let map_entry = |m: &DescriptorProto| m.options.as_ref().is_some_and(|x| x.map_entry());
            self.eq(&scope, "map entry", map_entry(o), map_entry(t));
            let oneofs = |m: &DescriptorProto| {
                m.oneof_decl
                    .iter()
                    .map(|x| x.name().to_owned())
                    .collect::<Vec<_>>()
            };
            self.eq(&scope, "oneofs", oneofs(o), oneofs(t));
            for (of, tf) in pair(self, "field", &scope, &o.field, &t.field, |f| f.name()) {
                self.field(&scope, o, t, of, tf);
            }
            self.messages(&full, &o.nested_type, &t.nested_type);
            self.enums(&full, &o.enum_type, &t.enum_type);
        }
    }

    fn field(
        &mut self,
        scope: &str,
        om: &DescriptorProto,
        tm: &DescriptorProto,
        o: &FieldDescriptorProto,
        t: &FieldDescriptorProto,
    ) {
        let scope = format!("{scope} field {}", o.name());
        self.eq(&scope, "number", o.number(), t.number());
        self.eq(&scope, "type", o.r#type(), t.r#type());
        self.eq(&scope, "type name", o.type_name(), t.type_name());
        self.eq(&scope, "label", o.label(), t.label());
        self.eq(
            &scope,
            "proto3 optional",
            o.proto3_optional(),
            t.proto3_optional(),
        );
        let oneof = |m: &DescriptorProto, f: &FieldDescriptorProto| {
            f.oneof_index
                .and_then(|i| m.oneof_decl.get(usize::try_from(i).ok()?))
                .map(|x| x.name().to_owned())
        };
        self.eq(&scope, "oneof", oneof(om, o), oneof(tm, t));
        // A descriptor may leave json_name out (it is then derived from the
        // name): compared only where both state it.
        if o.json_name.is_some() && t.json_name.is_some() {
            self.eq(&scope, "JSON name", o.json_name(), t.json_name());
        }
        let deprecated =
            |f: &FieldDescriptorProto| f.options.as_ref().is_some_and(|x| x.deprecated());
        self.eq(&scope, "deprecated", deprecated(o), deprecated(t));
    }

    fn enums(
        &mut self,
        parent: &str,
        ours: &[EnumDescriptorProto],
        theirs: &[EnumDescriptorProto],
    ) {
        for (o, t) in pair(self, "enum", parent, ours, theirs, |e| e.name()) {
            let scope = format!("enum {parent}.{}", o.name());
            for (ov, tv) in pair(self, "value", &scope, &o.value, &t.value, |v| v.name()) {
                self.eq(
                    &format!("{scope}.{}", ov.name()),
                    "number",
                    ov.number(),
                    tv.number(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Change = Box<dyn Fn(&mut FileDescriptorProto)>;

    fn message<'a>(file: &'a mut FileDescriptorProto, name: &str) -> &'a mut DescriptorProto {
        file.message_type
            .iter_mut()
            .find(|m| m.name() == name)
            .expect("message exists")
    }

    #[test]
    fn ours_agrees_with_itself() {
        assert_eq!(compare(&ours(), &ours()), Vec::<String>::new());
    }

    #[test]
    fn one_changed_field_number_is_a_difference() {
        let mut theirs = ours();
        let id = message(&mut theirs, "Task")
            .field
            .iter_mut()
            .find(|f| f.name() == "id")
            .unwrap();
        id.number = Some(9);
        assert_eq!(
            compare(&ours(), &theirs),
            vec!["message lf.a2a.v1.Task field id: number is 1 here, 9 in theirs".to_owned()]
        );
    }

    #[test]
    fn every_kind_of_change_is_a_difference() {
        let base = ours();
        let mut changes: Vec<(&str, Change)> = vec![
            ("package", Box::new(|f| f.package = Some("a2a.v1".into()))),
            (
                "rpc",
                Box::new(|f| {
                    f.service[0].method.remove(0);
                }),
            ),
            (
                "streaming",
                Box::new(|f| f.service[0].method[1].server_streaming = Some(false)),
            ),
            (
                "field type",
                Box::new(|f| {
                    let m = message(f, "Message");
                    m.field
                        .iter_mut()
                        .find(|x| x.name() == "task_id")
                        .unwrap()
                        .set_type(prost_types::field_descriptor_proto::Type::Bytes);
                }),
            ),
            (
                "label",
                Box::new(|f| {
                    let m = message(f, "Task");
                    m.field
                        .iter_mut()
                        .find(|x| x.name() == "history")
                        .unwrap()
                        .set_label(prost_types::field_descriptor_proto::Label::Optional);
                }),
            ),
            (
                "missing field",
                Box::new(|f| {
                    message(f, "Part")
                        .field
                        .retain(|x| x.name() != "media_type")
                }),
            ),
            (
                "missing message",
                Box::new(|f| f.message_type.retain(|m| m.name() != "StringList")),
            ),
            (
                "enum value",
                Box::new(|f| f.enum_type[0].value[3].number = Some(30)),
            ),
            (
                "map value type",
                Box::new(|f| {
                    let card = message(f, "AgentCard");
                    let entry = card
                        .nested_type
                        .iter_mut()
                        .find(|m| m.name() == "SecuritySchemesEntry")
                        .unwrap();
                    entry.field[1].type_name = Some(".lf.a2a.v1.StringList".into());
                }),
            ),
        ];
        for (what, change) in changes.drain(..) {
            let mut theirs = base.clone();
            change(&mut theirs);
            assert_eq!(
                compare(&base, &theirs).len(),
                1,
                "{what}: {:?}",
                compare(&base, &theirs)
            );
        }
    }

    #[test]
    fn a_left_out_google_api_import_is_no_difference_and_another_is() {
        let mut theirs = ours();
        theirs
            .dependency
            .push("google/api/field_behavior.proto".into());
        assert!(compare(&ours(), &theirs).is_empty());
        theirs.dependency.push("google/protobuf/any.proto".into());
        assert_eq!(compare(&ours(), &theirs).len(), 1);
    }
}
