//! Differential test of `bindery::wire::gogo` against the Go it copies:
//! `runtime.Unknown`'s gogo-generated `Unmarshal` in k8s.io/apimachinery
//! v0.34.10 (`tests/oracles/unknown`, pinned in its go.mod), which
//! kube-apiserver's protobuf serializer reads every protobuf body's
//! envelope with and whose error words it puts in its 400s. Built with
//! `go build` into `<target>/oracles/`; without Go, or if it does not
//! build, this fails: it never skips.
//!
//! Cases are a few fixed ones and thousands of random envelopes from a
//! seeded `TestRng`: fields of every number and wire type (varints of up
//! to eleven bytes, lengths past the end and past Go's `int`, groups,
//! fixed widths cut short), a nested `TypeMeta` of the same, some then
//! cut short or with a byte changed, and plain random bytes. Both must
//! accept the same envelopes with the same apiVersion and kind, or refuse
//! them with the same error text.

#[path = "oracles/runner.rs"]
mod runner;

use bindery::wire::gogo::{TypeMeta, unknown};
use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::{Value, json};

const CASES: usize = 6000;

fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct Cases(TestRng);

impl Cases {
    fn below(&mut self, n: u32) -> u32 {
        self.0.next_u32() % n
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent
    }

    /// A varint's value: mostly small, sometimes at the edges of Go's ints.
    fn number(&mut self) -> u64 {
        match self.below(6) {
            0..=2 => u64::from(self.below(16)),
            3 => u64::from(self.0.next_u32()),
            4 => {
                [i64::MAX as u64, u64::MAX, 1 << 63, (1 << 31) - 1, 1 << 31][self.below(5) as usize]
            }
            _ => self.0.next_u64(),
        }
    }

    fn text(&mut self) -> Vec<u8> {
        let pool: &[&[u8]] = &[
            b"v1",
            b"g/v1",
            b"Widget",
            b"",
            b"a/b/c",
            b"\xff\xfe",
            b"apps/v1",
        ];
        pool[self.below(pool.len() as u32) as usize].to_vec()
    }

    /// One field of a message whose string fields are `strings`, and whose
    /// field `nested` (if any) holds a `TypeMeta`.
    fn field(&mut self, nested: Option<u64>, depth: u32, out: &mut Vec<u8>) {
        let number = match self.below(10) {
            0 => 0,
            1 => self.number() >> 3,
            2..=4 => 1,
            5..=6 => 2,
            _ => u64::from(self.below(5)),
        };
        let wire_type = if self.chance(75) {
            2
        } else {
            u64::from(self.below(8))
        };
        varint(number << 3 | wire_type, out);
        match wire_type {
            0 => {
                let value = self.number();
                varint(value, out);
                if self.chance(5) {
                    out.extend([0x80; 10]);
                    out.push(1);
                }
            }
            1 => out.extend((0..self.below(10)).map(|i| i as u8)),
            5 => out.extend((0..self.below(6)).map(|i| i as u8)),
            2 => {
                let payload = if Some(number) == nested && depth < 2 {
                    self.message(None, depth + 1)
                } else {
                    self.text()
                };
                let length = match self.below(12) {
                    0 => self.number(),
                    1 => payload.len() as u64 + 1,
                    _ => payload.len() as u64,
                };
                varint(length, out);
                out.extend(payload);
            }
            _ => {}
        }
    }

    fn message(&mut self, nested: Option<u64>, depth: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..self.below(5) {
            self.field(nested, depth, &mut out);
        }
        out
    }

    fn case(&mut self) -> Vec<u8> {
        if self.chance(10) {
            return (0..self.below(24))
                .map(|_| self.0.next_u32() as u8)
                .collect();
        }
        let mut envelope = self.message(Some(1), 0);
        if !envelope.is_empty() && self.chance(15) {
            let cut = self.below(envelope.len() as u32) as usize;
            envelope.truncate(cut);
        }
        if !envelope.is_empty() && self.chance(10) {
            let at = self.below(envelope.len() as u32) as usize;
            envelope[at] = self.0.next_u32() as u8;
        }
        envelope
    }
}

fn fixed_cases() -> Vec<Vec<u8>> {
    let type_meta = [&[0x0a, 4][..], b"g/v1", &[0x12, 6], b"Widget"].concat();
    let whole = [
        &[0x0a, type_meta.len() as u8][..],
        &type_meta,
        &[0x12, 2, b'{', b'}'],
    ]
    .concat();
    vec![
        vec![],
        whole.clone(),
        whole[..whole.len() - 1].to_vec(),
        vec![0x0a],
        vec![
            0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
        vec![
            0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
        ],
        vec![0x0c],
        vec![0x0b, 0x0c],
        vec![0x07],
        vec![0x00],
        vec![0x1a, 0x01, 0x00, 0x22, 0x00, 0x28, 0x05],
        [&[0x0a, 2][..], &[0x0a, 5]].concat(),
    ]
}

fn ours(case: &[u8]) -> Value {
    match unknown(case) {
        Ok(TypeMeta { api_version, kind }) => {
            json!({"ok": true, "apiVersion": api_version, "kind": kind})
        }
        Err(error) => json!({"ok": false, "error": error}),
    }
}

/// The oracle's answer, with Go's omitted empty strings put back.
fn theirs(answer: &Value) -> Value {
    if answer["ok"] == true {
        let text = |key: &str| answer[key].as_str().unwrap_or_default().to_string();
        json!({"ok": true, "apiVersion": text("apiVersion"), "kind": text("kind")})
    } else {
        answer.clone()
    }
}

#[test]
fn envelopes_are_read_as_gogos_unmarshal_reads_them() {
    let binary = runner::build(
        "unknown",
        "it needs k8s.io/apimachinery v0.34.10 and its dependencies in the module cache, or a module proxy",
    );
    let mut random = Cases(TestRng::from_seed(RngAlgorithm::ChaCha, &[0x6b; 32]));
    let mut cases = fixed_cases();
    cases.extend((0..CASES).map(|_| random.case()));
    let lines: Vec<String> = cases
        .iter()
        .map(|case| case.iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    let answers = runner::run("unknown", &binary, &lines, |line| {
        serde_json::from_str(line).map_err(|e| e.to_string())
    });
    let mut disagreements = Vec::new();
    let mut accepted = 0;
    for ((case, line), answer) in cases.iter().zip(&lines).zip(&answers) {
        let (ours, theirs) = (ours(case), theirs(answer));
        if ours != theirs {
            disagreements.push(format!("{line}: bindery {ours}, Go {theirs}"));
        }
        accepted += usize::from(theirs["ok"] == true);
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} envelopes read otherwise than Go reads them:\n{}",
        disagreements.len(),
        cases.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
    // The cases reach both sides of the reader.
    assert!(accepted > cases.len() / 20, "only {accepted} accepted");
    assert!(accepted < cases.len() * 19 / 20, "{accepted} accepted");
}
