//! `descriptor_check FILE`: compares our `proto/a2a.proto` with another
//! descriptor of A2A's `a2a.proto` (FILE holds one encoded
//! `FileDescriptorProto`, as the official Python SDK's `a2a_pb2` module
//! carries it), on every wire fact (see `a2a_grpc::conformance`). Prints each
//! difference and exits 1 if there is any, 2 if FILE cannot be read.

use prost::Message;
use prost_types::FileDescriptorProto;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: descriptor_check FILE (one encoded FileDescriptorProto)");
        std::process::exit(2);
    };
    let theirs = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| FileDescriptorProto::decode(b.as_slice()).map_err(|e| e.to_string()))
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot read a descriptor from {path}: {e}");
            std::process::exit(2);
        }
    };
    let ours = a2a_grpc::conformance::ours();
    let diffs = a2a_grpc::conformance::compare(&ours, &theirs);
    let (messages, fields) = count(&ours);
    if diffs.is_empty() {
        println!(
            "a2a.proto ({}) matches {path}: {} rpcs, {messages} messages, {fields} fields, {} enums",
            ours.package(),
            ours.service.iter().map(|s| s.method.len()).sum::<usize>(),
            ours.enum_type.len(),
        );
        return;
    }
    for d in &diffs {
        println!("{d}");
    }
    println!(
        "{} difference(s) between grpc/proto/a2a.proto and {path}",
        diffs.len()
    );
    std::process::exit(1);
}

/// Messages (nested ones too) and their fields.
fn count(f: &FileDescriptorProto) -> (usize, usize) {
    fn walk(ms: &[prost_types::DescriptorProto], acc: &mut (usize, usize)) {
        for m in ms {
            acc.0 += 1;
            acc.1 += m.field.len();
            walk(&m.nested_type, acc);
        }
    }
    let mut acc = (0, 0);
    walk(&f.message_type, &mut acc);
    acc
}
