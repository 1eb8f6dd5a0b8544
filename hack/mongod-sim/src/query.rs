//! Reads: `find` and the part of `aggregate` that drivers use for
//! `count_documents` — `$match`, `$skip`, `$limit` and `$group` with `$sum` — with
//! mongod's cursor reply (one batch, cursor id 0) and mongod's codes for the
//! malformed pipelines and unknown stages it refuses.

use crate::commands::{db_of, num, CmdResult};
use crate::error::{self, fail, CmdError};
use crate::member::Member;
use crate::values::{get_path, type_name, values_equal};
use bson::{doc, Bson, Document};

/// Reads on a non-primary need a non-primary `$readPreference` (else 13435).
fn check_readable(member: &Member, body: &Document) -> Result<(), CmdError> {
    let secondary_ok = body
        .get_document("$readPreference")
        .ok()
        .and_then(|r| r.get_str("mode").ok())
        .map(|m| m != "primary")
        .unwrap_or(false);
    // `checkCanServeReadsFor`: without secondaryOk only a primary that
    // accepts writes serves reads (not one catching up or stepping down).
    if !member.is_writable_primary() && !secondary_ok {
        return fail(
            error::NOT_PRIMARY_NO_SECONDARY_OK,
            "not primary and secondaryOk=false",
        );
    }
    Ok(())
}

/// A query filter: fields (top-level or dotted paths through embedded documents)
/// compared for equality, numbers by value as mongod does. Query operators are
/// not modelled; a filter using one is refused (mongod's code and message for an
/// operator it does not know) rather than silently compared as a value.
pub(crate) struct Filter(Document);

impl Filter {
    pub(crate) fn parse(filter: &Document) -> Result<Filter, CmdError> {
        for (k, v) in filter {
            if k.starts_with('$') {
                return fail(error::BAD_VALUE, format!("unknown top level operator: {k}"));
            }
            if let Bson::Document(d) = v {
                if let Some(op) = d.keys().next().filter(|op| op.starts_with('$')) {
                    return fail(error::BAD_VALUE, format!("unknown operator: {op}"));
                }
            }
        }
        Ok(Filter(filter.clone()))
    }

    pub(crate) fn matches(&self, d: &Document) -> bool {
        self.0.iter().all(|(k, v)| match get_path(d, k) {
            Some(found) => values_equal(found, v),
            // A missing field equals null, as in mongod.
            None => *v == Bson::Null,
        })
    }

    /// The equality fields (what an upsert seeds its new document with).
    pub(crate) fn equalities(&self) -> impl Iterator<Item = (&String, &Bson)> {
        self.0.iter()
    }
}

fn cursor_reply(ns: String, batch: Vec<Document>) -> Document {
    let batch: Vec<Bson> = batch.into_iter().map(Bson::Document).collect();
    doc! { "cursor": { "firstBatch": batch, "id": 0_i64, "ns": ns } }
}

pub(crate) fn find(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let coll = body
        .get_str("find")
        .map_err(|_| CmdError::new(error::BAD_VALUE, "collection name must be a string"))?;
    let ns = format!("{db}.{coll}");
    check_readable(member, body)?;
    let filter = Filter::parse(&body.get_document("filter").cloned().unwrap_or_default())?;
    let limit = num(body.get("limit"))
        .filter(|l| *l > 0.0)
        .map(|l| l as usize)
        .unwrap_or(usize::MAX);
    let disk = member.disk();
    let batch = disk
        .collection(&ns)
        .iter()
        .filter(|d| filter.matches(d))
        .take(limit)
        .cloned()
        .collect();
    Ok(cursor_reply(ns, batch))
}

/// One parsed pipeline stage.
enum Stage {
    Match(Filter),
    Skip(usize),
    Limit(usize),
    Group(Group),
}

/// `$group`: `_id` a constant or a `$field` path, each other field `{$sum: <n or $field>}`.
struct Group {
    id: Bson,
    sums: Vec<(String, Bson)>,
}

fn stage_error(code: i32, msg: impl Into<String>) -> CmdError {
    CmdError::new(code, msg)
}

/// A non-negative integral number, as mongod's `parseIntegerElementToNonNegativeLong`.
fn non_negative_integer(v: &Bson) -> Result<usize, String> {
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => *d as i64,
        other => return Err(format!("Expected an integer: {other}")),
    };
    usize::try_from(n).map_err(|_| format!("Expected a non-negative number in: {n}"))
}

/// Rejects expression operators in `$group`'s `_id` and `$sum` (none are modelled).
fn check_expression(v: &Bson) -> Result<(), CmdError> {
    match v {
        Bson::Document(d) => {
            if let Some(op) = d.keys().find(|k| k.starts_with('$')) {
                return Err(stage_error(
                    error::INVALID_PIPELINE_OPERATOR,
                    format!("Unrecognized expression '{op}'"),
                ));
            }
            d.values().try_for_each(check_expression)
        }
        Bson::Array(a) => a.iter().try_for_each(check_expression),
        _ => Ok(()),
    }
}

fn parse_group(spec: &Bson) -> Result<Group, CmdError> {
    let Bson::Document(spec) = spec else {
        return Err(stage_error(
            error::GROUP_FIELDS_NOT_OBJECT,
            "a group's fields must be specified in an object",
        ));
    };
    let id = spec.get("_id").cloned().ok_or_else(|| {
        stage_error(
            error::GROUP_WITHOUT_ID,
            "a group specification must include an _id",
        )
    })?;
    check_expression(&id)?;
    let mut sums = Vec::new();
    for (field, acc) in spec.iter().filter(|(k, _)| k.as_str() != "_id") {
        let Bson::Document(acc) = acc else {
            return Err(stage_error(
                error::GROUP_FIELD_NOT_ACCUMULATOR,
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        if acc.len() != 1 {
            return Err(stage_error(
                error::GROUP_FIELD_NOT_ONE_ACCUMULATOR,
                format!("The field '{field}' must specify one accumulator"),
            ));
        }
        let (op, arg) = acc.iter().next().expect("one accumulator");
        if op != "$sum" {
            return Err(stage_error(
                error::UNKNOWN_GROUP_OPERATOR,
                format!("unknown group operator '{op}'"),
            ));
        }
        check_expression(arg)?;
        sums.push((field.clone(), arg.clone()));
    }
    Ok(Group { id, sums })
}

fn parse_stage(stage: &Bson) -> Result<Stage, CmdError> {
    let Bson::Document(stage) = stage else {
        return Err(stage_error(
            error::TYPE_MISMATCH,
            "Each element of the 'pipeline' array must be an object",
        ));
    };
    if stage.len() != 1 {
        return Err(stage_error(
            error::STAGE_NOT_ONE_FIELD,
            "A pipeline stage specification object must contain exactly one field.",
        ));
    }
    let (name, spec) = stage.iter().next().expect("one field");
    match name.as_str() {
        "$match" => match spec {
            Bson::Document(f) => Ok(Stage::Match(Filter::parse(f)?)),
            _ => Err(stage_error(
                error::MATCH_NOT_OBJECT,
                "the match filter must be an expression in an object",
            )),
        },
        "$skip" => non_negative_integer(spec).map(Stage::Skip).map_err(|e| {
            stage_error(
                error::INVALID_SKIP,
                format!("invalid argument to $skip stage: {e}"),
            )
        }),
        "$limit" => match non_negative_integer(spec) {
            Ok(0) => Err(stage_error(
                error::LIMIT_NOT_POSITIVE,
                "the limit must be positive",
            )),
            Ok(n) => Ok(Stage::Limit(n)),
            Err(e) => Err(stage_error(
                error::INVALID_LIMIT,
                format!("invalid argument to $limit stage: {e}"),
            )),
        },
        "$group" => parse_group(spec).map(Stage::Group),
        other => Err(stage_error(
            error::UNRECOGNIZED_PIPELINE_STAGE,
            format!("Unrecognized pipeline stage name: '{other}'"),
        )),
    }
}

/// The value of a `$`-prefixed (dotted) field path in a document, or a constant.
fn evaluate(expr: &Bson, d: &Document) -> Bson {
    match expr {
        Bson::String(s) if s.starts_with('$') => {
            let mut cur = Some(Bson::Document(d.clone()));
            for part in s[1..].split('.') {
                cur = match cur {
                    Some(Bson::Document(inner)) => inner.get(part).cloned(),
                    _ => None,
                };
            }
            cur.unwrap_or(Bson::Null)
        }
        Bson::Document(fields) => Bson::Document(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), evaluate(v, d)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `$sum` as mongod computes it: non-numbers are ignored; the result is an int
/// while every input is an int and it fits, a long while inputs are integers,
/// else a double.
#[derive(Default, Clone)]
struct Sum {
    int: i64,
    float: f64,
    long: bool,
    double: bool,
}

impl Sum {
    fn add(&mut self, v: &Bson) {
        match v {
            Bson::Int32(i) => self.add_int(*i as i64),
            Bson::Int64(i) => {
                self.long = true;
                self.add_int(*i)
            }
            Bson::Double(f) => {
                self.double = true;
                self.float += f;
            }
            _ => {}
        }
    }

    fn add_int(&mut self, i: i64) {
        match self.int.checked_add(i) {
            Some(s) => self.int = s,
            None => {
                self.double = true;
                self.float += i as f64;
            }
        }
    }

    fn value(&self) -> Bson {
        if self.double {
            Bson::Double(self.float + self.int as f64)
        } else if self.long || i32::try_from(self.int).is_err() {
            Bson::Int64(self.int)
        } else {
            Bson::Int32(self.int as i32)
        }
    }
}

fn run_group(group: &Group, docs: Vec<Document>) -> Vec<Document> {
    let mut groups: Vec<(Bson, Vec<Sum>)> = Vec::new();
    for d in &docs {
        let key = evaluate(&group.id, d);
        let i = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, vec![Sum::default(); group.sums.len()]));
                groups.len() - 1
            }
        };
        for (sum, (_, arg)) in groups[i].1.iter_mut().zip(&group.sums) {
            sum.add(&evaluate(arg, d));
        }
    }
    groups
        .into_iter()
        .map(|(key, sums)| {
            let mut out = doc! { "_id": key };
            for ((field, _), sum) in group.sums.iter().zip(sums) {
                out.insert(field.clone(), sum.value());
            }
            out
        })
        .collect()
}

pub(crate) fn aggregate(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let pipeline = match body.get("pipeline") {
        Some(Bson::Array(p)) => p.clone(),
        Some(other) => {
            return fail(
                error::TYPE_MISMATCH,
                format!(
                    "BSON field 'aggregate.pipeline' is the wrong type '{}', expected type 'array'",
                    type_name(other)
                ),
            )
        }
        None => {
            return fail(
                error::IDL_REQUIRED_FIELD_MISSING,
                "BSON field 'aggregate.pipeline' is missing but a required field",
            )
        }
    };
    if !body.contains_key("cursor") && !body.contains_key("explain") {
        return fail(
            error::FAILED_TO_PARSE,
            "The 'cursor' option is required, except for aggregate with the explain argument",
        );
    }
    let stages = pipeline
        .iter()
        .map(parse_stage)
        .collect::<Result<Vec<_>, _>>()?;
    let coll = match body.get("aggregate") {
        Some(Bson::String(c)) => c.clone(),
        _ => {
            let first = pipeline
                .first()
                .and_then(|s| s.as_document())
                .and_then(|s| s.keys().next().cloned())
                .unwrap_or_default();
            return fail(
                error::INVALID_NAMESPACE,
                format!("{{aggregate: 1}} is not valid for '{first}'; a collection is required."),
            );
        }
    };
    let ns = format!("{db}.{coll}");
    check_readable(member, body)?;
    let mut docs: Vec<Document> = member.disk().collection(&ns).to_vec();
    for stage in &stages {
        docs = match stage {
            Stage::Match(f) => docs.into_iter().filter(|d| f.matches(d)).collect(),
            Stage::Skip(n) => docs.into_iter().skip(*n).collect(),
            Stage::Limit(n) => docs.into_iter().take(*n).collect(),
            Stage::Group(g) => run_group(g, docs),
        };
    }
    Ok(cursor_reply(ns, docs))
}
