//! Writes that change documents, with mongod's reply shapes and codes:
//!
//! - `update` with `updates: [{q, u, upsert, multi}]`: `q` the equality filter of
//!   `find`; `u` a replacement document or modifiers `$set` / `$unset` /
//!   `$setOnInsert` (dotted paths, array indexes), applied in mongod's order
//!   (field names sorted), with its checks: unknown modifier (9), conflicting
//!   paths (40), immutable `_id` (66), a field that cannot be created (28),
//!   `$`-prefixed fields in the stored document (52), empty field names (56),
//!   multi with a replacement (9), duplicate `_id` on upsert (11000). Reply
//!   `{n, nModified, upserted: [{index, _id}]}`.
//! - `delete` with `deletes: [{q, limit}]` (limit 0 = all, 1 = one). Reply `{n}`.
//!
//! Both replicate through the oplog (a changed document travels as its
//! post-image, a deleted one as its `_id`), refuse on a non-primary (10107) and
//! honour `writeConcern` as `insert` does. Statement errors are `writeErrors`;
//! malformed commands fail whole (mongod's IDL codes 40414, 14, 9). As
//! retryable writes ([`crate::retryable`]) a statement executed already is
//! answered from its entry and not run again, and `multi: true` / `limit: 0`
//! statements are refused (72).

use crate::commands::{
    collection_name, db_of, duplicate_key_error, finish_write, not_primary, write_error, CmdResult,
};
use crate::error::{self, fail, CmdError};
use crate::member::Member;
use crate::query::Filter;
use crate::retryable::{Executed, RetryableWrite};
use crate::state::{is_fcv_document, Op};
use crate::values::{identical, render, type_name, values_equal};
use crate::version::ServerVersion;
use crate::writes::write_statements;
use bson::{doc, oid::ObjectId, Bson, Document};

const PATH_NOT_VIABLE: i32 = 28;
const CONFLICTING_UPDATE_OPERATORS: i32 = 40;
const DOLLAR_PREFIXED_FIELD_NAME: i32 = 52;
const EMPTY_FIELD_NAME: i32 = 56;
const IMMUTABLE_FIELD: i32 = 66;
const INVALID_OPTIONS: i32 = 72;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModKind {
    Set,
    Unset,
    SetOnInsert,
}

/// One modification of a modifier-style update.
#[derive(Debug, Clone)]
struct Modification {
    kind: ModKind,
    path: String,
    parts: Vec<String>,
    value: Bson,
}

/// A parsed `u`.
#[derive(Debug, Clone)]
enum UpdateSpec {
    Replacement(Document),
    /// Sorted by path, as mongod applies them.
    Modifiers(Vec<Modification>),
}

/// One `updates` entry.
struct UpdateStatement {
    q: Document,
    u: Bson,
    upsert: bool,
    multi: bool,
}

/// Every modifier mongod's modifier table knows. Only `$set`, `$unset` and
/// `$setOnInsert` are modelled; the others are refused with mongod's message for
/// an unknown modifier (a documented difference).
const MODELLED_MODIFIERS: &[&str] = &["$set", "$unset", "$setOnInsert"];

fn unknown_modifier(name: &str) -> CmdError {
    CmdError::new(
        error::FAILED_TO_PARSE,
        format!("Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update specified as an array"),
    )
}

fn dollar_prefixed(field: &str, path: &str) -> CmdError {
    CmdError::new(
        DOLLAR_PREFIXED_FIELD_NAME,
        format!("The dollar ($) prefixed field '{field}' in '{path}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."),
    )
}

fn is_prefix(short: &[String], long: &[String]) -> bool {
    short.len() <= long.len() && short.iter().zip(long).all(|(a, b)| a == b)
}

/// Parses `u` as mongod's `UpdateModification` and `UpdateDriver::parse` do.
fn parse_update(u: &Bson) -> Result<UpdateSpec, CmdError> {
    let u = match u {
        Bson::Array(stages) => {
            // Pipeline-style updates are not modelled: the first stage is refused
            // as mongod refuses a stage it does not allow in an update (an empty
            // pipeline changes nothing).
            return match stages.first() {
                None => Ok(UpdateSpec::Modifiers(Vec::new())),
                Some(Bson::Document(stage)) => fail(
                    INVALID_OPTIONS,
                    format!(
                        "{} is not allowed to be used within an update",
                        stage.keys().next().cloned().unwrap_or_default()
                    ),
                ),
                Some(_) => fail(
                    error::TYPE_MISMATCH,
                    "Each element of the 'pipeline' array must be an object",
                ),
            };
        }
        Bson::Document(u) => u,
        _ => unreachable!("checked when the statement was parsed"),
    };
    if !u.keys().next().is_some_and(|k| k.starts_with('$')) {
        return Ok(UpdateSpec::Replacement(u.clone()));
    }
    let mut mods: Vec<Modification> = Vec::new();
    for (name, arg) in u {
        if !MODELLED_MODIFIERS.contains(&name.as_str()) {
            return Err(unknown_modifier(name));
        }
        let Bson::Document(fields) = arg else {
            return fail(
                error::FAILED_TO_PARSE,
                format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                    type_name(arg),
                    render(arg)
                ),
            );
        };
        let kind = match name.as_str() {
            "$set" => ModKind::Set,
            "$unset" => ModKind::Unset,
            _ => ModKind::SetOnInsert,
        };
        for (path, value) in fields {
            if path.is_empty() {
                return fail(EMPTY_FIELD_NAME, "An empty update path is not valid.");
            }
            let parts: Vec<String> = path.split('.').map(str::to_string).collect();
            if parts.iter().any(String::is_empty) {
                return fail(
                    EMPTY_FIELD_NAME,
                    format!("The update path '{path}' contains an empty field name, which is not allowed."),
                );
            }
            if parts.iter().skip(1).any(|p| p.starts_with('$')) {
                // Positional paths (`a.$`, `a.$[]`) need an array match from the
                // query; top-level equality never provides one.
                return fail(
                    error::BAD_VALUE,
                    "The positional operator did not find the match needed from the query.",
                );
            }
            if let Some(other) = mods
                .iter()
                .find(|m| is_prefix(&m.parts, &parts) || is_prefix(&parts, &m.parts))
            {
                let at = if other.parts.len() <= parts.len() {
                    &other.path
                } else {
                    path
                };
                return fail(
                    CONFLICTING_UPDATE_OPERATORS,
                    format!("Updating the path '{path}' would create a conflict at '{at}'"),
                );
            }
            mods.push(Modification {
                kind,
                path: path.clone(),
                parts,
                value: value.clone(),
            });
        }
    }
    mods.sort_by(|a, b| a.parts.cmp(&b.parts));
    Ok(UpdateSpec::Modifiers(mods))
}

fn cannot_create(field: &str, name: &str, element: &Bson) -> CmdError {
    CmdError::new(
        PATH_NOT_VIABLE,
        format!(
            "Cannot create field '{field}' in element {{{name}: {}}}",
            render(element)
        ),
    )
}

/// `$set` of `parts` in `d` (missing documents on the way are created).
fn set_in_document(d: &mut Document, parts: &[String], value: Bson) -> Result<(), CmdError> {
    let (first, rest) = parts.split_first().expect("non-empty path");
    if rest.is_empty() {
        d.insert(first.clone(), value);
        return Ok(());
    }
    match d.get_mut(first) {
        None => {
            let mut sub = Document::new();
            set_in_document(&mut sub, rest, value)?;
            d.insert(first.clone(), sub);
            Ok(())
        }
        Some(Bson::Document(sub)) => set_in_document(sub, rest, value),
        Some(Bson::Array(items)) => set_in_array(items, first, rest, value),
        Some(other) => Err(cannot_create(&rest[0], first, other)),
    }
}

/// `$set` through an array: the component must be an index; missing elements
/// are padded with nulls.
fn set_in_array(
    items: &mut Vec<Bson>,
    name: &str,
    parts: &[String],
    value: Bson,
) -> Result<(), CmdError> {
    let (first, rest) = parts.split_first().expect("non-empty path");
    let Ok(index) = first.parse::<usize>() else {
        return Err(cannot_create(first, name, &Bson::Array(items.clone())));
    };
    let created = index >= items.len();
    while items.len() <= index {
        items.push(Bson::Null);
    }
    if rest.is_empty() {
        items[index] = value;
        return Ok(());
    }
    if created {
        let mut sub = Document::new();
        set_in_document(&mut sub, rest, value)?;
        items[index] = Bson::Document(sub);
        return Ok(());
    }
    match &mut items[index] {
        Bson::Document(sub) => set_in_document(sub, rest, value),
        Bson::Array(inner) => set_in_array(inner, first, rest, value),
        other => Err(cannot_create(&rest[0], first, other)),
    }
}

/// `$unset` of `parts` in `d`: removes a field, nulls an array element, and does
/// nothing when the path does not exist.
fn unset_in_document(d: &mut Document, parts: &[String]) {
    let (first, rest) = parts.split_first().expect("non-empty path");
    if rest.is_empty() {
        d.remove(first);
        return;
    }
    match d.get_mut(first) {
        Some(Bson::Document(sub)) => unset_in_document(sub, rest),
        Some(Bson::Array(items)) => unset_in_array(items, rest),
        _ => {}
    }
}

fn unset_in_array(items: &mut [Bson], parts: &[String]) {
    let (first, rest) = parts.split_first().expect("non-empty path");
    let Some(item) = first.parse::<usize>().ok().and_then(|i| items.get_mut(i)) else {
        return;
    };
    if rest.is_empty() {
        *item = Bson::Null;
        return;
    }
    match item {
        Bson::Document(sub) => unset_in_document(sub, rest),
        Bson::Array(inner) => unset_in_array(inner, rest),
        _ => {}
    }
}

/// Storage validation of the document an update produced: no top-level field
/// may start with `$`.
fn check_storable(d: &Document) -> Result<(), CmdError> {
    match d.keys().find(|k| k.starts_with('$')) {
        Some(k) => Err(dollar_prefixed(k, k)),
        None => Ok(()),
    }
}

/// Applies modifiers to `d` (`inserting`: an upsert's new document, where
/// `$setOnInsert` applies). `_id` may not change if `d` had one.
fn apply_modifiers(d: &Document, mods: &[Modification], inserting: bool) -> CmdResult {
    let mut out = d.clone();
    for m in mods {
        match m.kind {
            ModKind::Set => set_in_document(&mut out, &m.parts, m.value.clone())?,
            ModKind::SetOnInsert if inserting => {
                set_in_document(&mut out, &m.parts, m.value.clone())?
            }
            ModKind::SetOnInsert => {}
            ModKind::Unset => unset_in_document(&mut out, &m.parts),
        }
    }
    if let Some(id) = d.get("_id") {
        if !out.get("_id").is_some_and(|new| new == id) {
            let path = mods
                .iter()
                .find(|m| m.parts[0] == "_id")
                .map(|m| m.path.as_str())
                .unwrap_or("_id");
            return fail(
                IMMUTABLE_FIELD,
                format!("Performing an update on the path '{path}' would modify the immutable field '_id'"),
            );
        }
    }
    check_storable(&out)?;
    Ok(out)
}

/// A replacement keeps the `_id` it replaces (first, when it has none).
fn apply_replacement(id: Option<&Bson>, replacement: &Document) -> CmdResult {
    let out = match (id, replacement.get("_id")) {
        (Some(old), Some(new)) if new != old => {
            return fail(
                IMMUTABLE_FIELD,
                format!("After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}", render(new)),
            )
        }
        (Some(old), None) => {
            let mut out = doc! { "_id": old.clone() };
            out.extend(replacement.clone());
            out
        }
        _ => replacement.clone(),
    };
    check_storable(&out)?;
    Ok(out)
}

/// `_id` first, generated if missing (mongod's insert path).
fn with_id_first(d: Document) -> Document {
    let id = d
        .get("_id")
        .cloned()
        .unwrap_or_else(|| Bson::ObjectId(ObjectId::new()));
    let mut out = doc! { "_id": id };
    out.extend(d.into_iter().filter(|(k, _)| k != "_id"));
    out
}

/// The document an upsert inserts: the filter's equalities, then the update.
fn upsert_document(filter: &Filter, spec: &UpdateSpec) -> CmdResult {
    let mut seed = Document::new();
    for (path, value) in filter.equalities() {
        let parts: Vec<String> = path.split('.').map(str::to_string).collect();
        set_in_document(&mut seed, &parts, value.clone())?;
    }
    let out = match spec {
        UpdateSpec::Modifiers(mods) => apply_modifiers(&seed, mods, true)?,
        UpdateSpec::Replacement(r) => apply_replacement(seed.get("_id"), r)?,
    };
    Ok(with_id_first(out))
}

/// The FCV op observer: a write of the FCV document must parse with the binary.
fn check_fcv(binary: ServerVersion, ns: &str, d: &Document) -> Result<(), CmdError> {
    if is_fcv_document(ns, d) {
        crate::fcv::check_write(binary, d)?;
    }
    Ok(())
}

fn missing(command: &str, field: &str) -> CmdError {
    CmdError::new(
        error::IDL_REQUIRED_FIELD_MISSING,
        format!("BSON field '{command}.{field}' is missing but a required field"),
    )
}

fn wrong_type(command: &str, field: &str, v: &Bson, expected: &str) -> CmdError {
    CmdError::new(
        error::TYPE_MISMATCH,
        format!(
            "BSON field '{command}.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

/// The statements array (`updates` / `deletes`) of a write command.
fn statements<'b>(
    body: &'b Document,
    command: &str,
    field: &str,
) -> Result<Vec<&'b Document>, CmdError> {
    let items = match body.get(field) {
        Some(Bson::Array(items)) => items,
        Some(other) => return Err(wrong_type(command, field, other, "array")),
        None => return Err(missing(command, field)),
    };
    items
        .iter()
        .map(|s| match s {
            Bson::Document(d) => Ok(d),
            other => Err(wrong_type(command, field, other, "object")),
        })
        .collect()
}

fn filter_of(statement: &Document, command: &str, field: &str) -> Result<Document, CmdError> {
    match statement.get("q") {
        Some(Bson::Document(q)) => Ok(q.clone()),
        Some(other) => Err(wrong_type(command, &format!("{field}.q"), other, "object")),
        None => Err(missing(command, &format!("{field}.q"))),
    }
}

fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => crate::commands::num(Some(other)).is_none_or(|n| n != 0.0),
    }
}

/// What one update statement did.
#[derive(Default)]
struct Outcome {
    n: i32,
    modified: i32,
    upserted: Option<Bson>,
}

/// Runs statement `index`; a failure is its `writeErrors` entry.
fn run_update(
    binary: ServerVersion,
    ns: &str,
    working: &mut Vec<Document>,
    ops: &mut Vec<Op>,
    (index, st): (usize, &UpdateStatement),
    outcome: &mut Outcome,
) -> Result<(), Bson> {
    let err = |e: CmdError| write_error(index, &e);
    let filter = Filter::parse(&st.q).map_err(err)?;
    let spec = parse_update(&st.u).map_err(err)?;
    if st.multi && matches!(spec, UpdateSpec::Replacement(_)) {
        return Err(err(CmdError::new(
            error::FAILED_TO_PARSE,
            "multi update is not supported for replacement-style update",
        )));
    }
    let mut matched: Vec<usize> = (0..working.len())
        .filter(|i| filter.matches(&working[*i]))
        .collect();
    if !st.multi {
        matched.truncate(1);
    }
    if matched.is_empty() && st.upsert {
        let new = upsert_document(&filter, &spec).map_err(err)?;
        let id = new.get("_id").cloned().unwrap_or(Bson::Null);
        if working
            .iter()
            .any(|d| d.get("_id").is_some_and(|x| values_equal(x, &id)))
        {
            return Err(duplicate_key_error(index, ns, &id));
        }
        check_fcv(binary, ns, &new).map_err(err)?;
        working.push(new.clone());
        ops.push(Op::Insert {
            ns: ns.to_string(),
            doc: new,
        });
        outcome.n += 1;
        outcome.upserted = Some(id);
        return Ok(());
    }
    for i in matched {
        let old = &working[i];
        let new = match &spec {
            UpdateSpec::Modifiers(mods) => apply_modifiers(old, mods, false),
            UpdateSpec::Replacement(r) => apply_replacement(old.get("_id"), r),
        }
        .map_err(err)?;
        outcome.n += 1;
        if identical(old, &new) {
            continue;
        }
        check_fcv(binary, ns, &new).map_err(err)?;
        working[i] = new.clone();
        ops.push(Op::Update {
            ns: ns.to_string(),
            doc: new,
        });
        outcome.modified += 1;
    }
    Ok(())
}

/// A retryable write's statement that may not be retried
/// (`write_ops_exec.cpp` `performSingleUpdateOp` / `performSingleDeleteOp`).
fn not_retryable(index: usize, what: &str) -> Bson {
    write_error(
        index,
        &CmdError::new(
            INVALID_OPTIONS,
            format!("Cannot use (or request) retryable writes with {what}"),
        ),
    )
}

/// What a retried update statement answers, from the entry it wrote
/// (`write_ops_retryability.cpp` `parseOplogEntryForUpdate`): an upsert
/// (an insert entry) n 1, nModified 0 and its `_id`; an update n 1,
/// nModified 1.
fn retried_update(disk: &crate::state::DurableState, optime: crate::state::OpTime) -> Outcome {
    match disk.entry_at(optime).map(|e| &e.op) {
        Some(Op::Insert { doc, .. }) => Outcome {
            n: 1,
            modified: 0,
            upserted: doc.get("_id").cloned(),
        },
        _ => Outcome {
            n: 1,
            modified: 1,
            upserted: None,
        },
    }
}

/// The `update` command.
pub(crate) async fn update(
    member: &Member,
    body: &Document,
    txn: Option<&RetryableWrite>,
) -> CmdResult {
    let db = db_of(body);
    let ns = format!("{db}.{}", collection_name(body, "update")?);
    let ordered = body.get_bool("ordered").unwrap_or(true);
    let mut parsed = Vec::new();
    for s in statements(body, "update", "updates")? {
        let q = filter_of(s, "update", "updates")?;
        let u = match s.get("u") {
            Some(u @ (Bson::Document(_) | Bson::Array(_))) => u.clone(),
            Some(_) => {
                return fail(
                    error::FAILED_TO_PARSE,
                    "Update argument must be either an object or an array",
                )
            }
            None => return Err(missing("update", "updates.u")),
        };
        parsed.push(UpdateStatement {
            q,
            u,
            upsert: truthy(s.get("upsert")),
            multi: truthy(s.get("multi")),
        });
    }
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let binary = member.version();
    let (optime, generation, (n, modified, upserted, write_errors)) =
        write_statements(member, txn, |disk, executed: &Executed| {
            let mut working = disk.collection(&ns).to_vec();
            let mut ops = Vec::new();
            let mut tagged = Vec::new();
            let (mut n, mut modified) = (0, 0);
            let mut upserted = Vec::new();
            let mut write_errors = Vec::new();
            for (i, st) in parsed.iter().enumerate() {
                let stmt_id = txn.map(|t| t.stmt_id(i));
                let mut outcome = Outcome::default();
                let result = match stmt_id.map(|id| executed.check(id)).transpose()? {
                    Some(Some(at)) => {
                        outcome = retried_update(disk, at);
                        Ok(())
                    }
                    _ if st.multi && txn.is_some() => Err(not_retryable(i, "multi=true")),
                    _ => run_update(binary, &ns, &mut working, &mut ops, (i, st), &mut outcome),
                };
                tagged.extend(ops.drain(..).map(|op| (op, stmt_id)));
                n += outcome.n;
                modified += outcome.modified;
                if let Some(id) = outcome.upserted {
                    upserted.push(Bson::Document(doc! { "index": i as i32, "_id": id }));
                }
                if let Err(e) = result {
                    write_errors.push(e);
                    if ordered {
                        break;
                    }
                }
            }
            Ok((tagged, (n, modified, upserted, write_errors)))
        })?;
    let mut reply = doc! { "n": n, "nModified": modified };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    finish_write(member, body, (optime, generation), reply, write_errors).await
}

/// The `delete` command.
pub(crate) async fn delete(
    member: &Member,
    body: &Document,
    txn: Option<&RetryableWrite>,
) -> CmdResult {
    let db = db_of(body);
    let ns = format!("{db}.{}", collection_name(body, "delete")?);
    let ordered = body.get_bool("ordered").unwrap_or(true);
    let mut parsed = Vec::new();
    for s in statements(body, "delete", "deletes")? {
        let q = filter_of(s, "delete", "deletes")?;
        let limit = match s.get("limit") {
            None => return Err(missing("delete", "deletes.limit")),
            Some(v) => crate::commands::num(Some(v)).unwrap_or(0.0),
        };
        if limit != 0.0 && limit != 1.0 {
            return fail(
                error::FAILED_TO_PARSE,
                format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
            );
        }
        parsed.push((q, limit == 1.0));
    }
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let (optime, generation, (n, write_errors)) =
        write_statements(member, txn, |disk, executed| {
            let mut working = disk.collection(&ns).to_vec();
            let mut ops = Vec::new();
            let mut n = 0;
            let mut write_errors = Vec::new();
            for (i, (q, just_one)) in parsed.iter().enumerate() {
                let stmt_id = txn.map(|t| t.stmt_id(i));
                if let Some(id) = stmt_id {
                    // `makeWriteResultForInsertOrDeleteRetry`: n 1.
                    if executed.check(id)?.is_some() {
                        n += 1;
                        continue;
                    }
                    if !just_one {
                        write_errors.push(not_retryable(i, "limit=0"));
                        if ordered {
                            break;
                        }
                        continue;
                    }
                }
                let result = (|| -> Result<(), CmdError> {
                    let filter = Filter::parse(q)?;
                    loop {
                        let Some(pos) = working.iter().position(|d| filter.matches(d)) else {
                            return Ok(());
                        };
                        if is_fcv_document(&ns, &working[pos]) {
                            return fail(
                                crate::fcv::REMOVING_FCV_DOCUMENT,
                                "removing FeatureCompatibilityVersion document is not allowed",
                            );
                        }
                        let removed = working.remove(pos);
                        ops.push((
                            Op::Delete {
                                ns: ns.clone(),
                                id: removed.get("_id").cloned().unwrap_or(Bson::Null),
                            },
                            stmt_id,
                        ));
                        n += 1;
                        if *just_one {
                            return Ok(());
                        }
                    }
                })();
                if let Err(e) = result {
                    write_errors.push(write_error(i, &e));
                    if ordered {
                        break;
                    }
                }
            }
            Ok((ops, (n, write_errors)))
        })?;
    finish_write(
        member,
        body,
        (optime, generation),
        doc! { "n": n },
        write_errors,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modifiers(u: Document) -> Vec<Modification> {
        match parse_update(&Bson::Document(u)).unwrap() {
            UpdateSpec::Modifiers(m) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn set_and_unset_follow_mongods_order_and_paths() {
        let d = doc! { "_id": 1, "z": 1, "a": { "b": 1 } };
        let out = apply_modifiers(
            &d,
            &modifiers(
                doc! { "$set": { "y": 2, "x": 3, "a.c": 4, "z": 5 }, "$unset": { "a.b": "" } },
            ),
            false,
        )
        .unwrap();
        // New fields appear in field-name order; existing ones keep their place.
        assert_eq!(
            out,
            doc! { "_id": 1, "z": 5, "a": { "c": 4 }, "x": 3, "y": 2 }
        );
        let arr = apply_modifiers(
            &doc! { "_id": 1, "l": [1] },
            &modifiers(doc! { "$set": { "l.2": 9 } }),
            false,
        )
        .unwrap();
        assert_eq!(arr, doc! { "_id": 1, "l": [1, Bson::Null, 9] });
    }

    #[test]
    fn mongods_errors_for_bad_updates() {
        let code = |u: Document| parse_update(&Bson::Document(u)).unwrap_err().code;
        assert_eq!(code(doc! { "$inc": { "n": 1 } }), 9);
        assert_eq!(code(doc! { "$set": 5 }), 9);
        assert_eq!(code(doc! { "$set": { "a": 1 }, "$unset": { "a": "" } }), 40);
        assert_eq!(code(doc! { "$set": { "a..b": 1 } }), 56);
        let e = parse_update(&Bson::Document(doc! { "$set": { "a": 1, "a.b": 2 } })).unwrap_err();
        assert_eq!(
            e.errmsg,
            "Updating the path 'a.b' would create a conflict at 'a'"
        );
        let d = doc! { "_id": 1, "a": 1 };
        let e = apply_modifiers(&d, &modifiers(doc! { "$set": { "_id": 2 } }), false).unwrap_err();
        assert_eq!(e.code, 66);
        let e = apply_modifiers(&d, &modifiers(doc! { "$set": { "a.b": 2 } }), false).unwrap_err();
        assert_eq!(
            (e.code, e.errmsg.as_str()),
            (28, "Cannot create field 'b' in element {a: 1}")
        );
        let e = apply_replacement(Some(&Bson::Int32(1)), &doc! { "_id": 2 }).unwrap_err();
        assert_eq!(e.code, 66);
        let e = apply_replacement(None, &doc! { "a": 1, "$x": 1 }).unwrap_err();
        assert_eq!(e.code, 52);
    }

    #[test]
    fn upserts_seed_from_the_filter() {
        let filter = Filter::parse(&doc! { "_id": "lease", "holder": "a" }).unwrap();
        let spec = parse_update(&Bson::Document(
            doc! { "$set": { "until": 5 }, "$setOnInsert": { "created": true } },
        ))
        .unwrap();
        assert_eq!(
            upsert_document(&filter, &spec).unwrap(),
            doc! { "_id": "lease", "holder": "a", "created": true, "until": 5 }
        );
        let replacement = parse_update(&Bson::Document(doc! { "holder": "b" })).unwrap();
        assert_eq!(
            upsert_document(&filter, &replacement).unwrap(),
            doc! { "_id": "lease", "holder": "b" }
        );
        let no_id = Filter::parse(&doc! { "k": 1 }).unwrap();
        let d = upsert_document(&no_id, &spec).unwrap();
        assert!(matches!(d.get("_id"), Some(Bson::ObjectId(_))));
        assert_eq!(d.keys().next().map(String::as_str), Some("_id"));
    }
}
