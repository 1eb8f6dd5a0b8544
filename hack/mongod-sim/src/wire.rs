//! MongoDB wire protocol framing: the 16-byte header, OP_MSG (2013) requests and
//! replies, and the legacy OP_QUERY (2004) / OP_REPLY (1) pair used for the
//! hello/isMaster handshake. Malformed input yields an error, never a panic.

use bson::{Bson, Document};
use tokio::io::{AsyncRead, AsyncReadExt};

pub const OP_REPLY: i32 = 1;
pub const OP_QUERY: i32 = 2004;
pub const OP_MSG: i32 = 2013;
/// Largest message accepted (mongod's maxMessageSizeBytes).
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;

const FLAG_CHECKSUM_PRESENT: u32 = 1;
const FLAG_MORE_TO_COME: u32 = 1 << 1;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    #[error("bad bson: {0}")]
    Bson(#[from] bson::de::Error),
    #[error("unsupported opcode {0}")]
    UnsupportedOpcode(i32),
}

/// A decoded client request.
#[derive(Debug)]
pub enum Request {
    /// OP_MSG with kind-1 sequences merged into the body.
    Msg {
        request_id: i32,
        more_to_come: bool,
        body: Document,
    },
    /// Legacy OP_QUERY (only commands on `<db>.$cmd` are meaningful).
    Query {
        request_id: i32,
        collection: String,
        query: Document,
    },
}

/// Reads one message; `Ok(None)` on a clean end of stream.
pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Request>, WireError> {
    let mut header = [0u8; 16];
    match r.read_exact(&mut header).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = i32_at(&header, 0)?;
    let request_id = i32_at(&header, 4)?;
    let op_code = i32_at(&header, 12)?;
    if len < 16 || len as usize > MAX_MESSAGE_SIZE {
        return Err(WireError::Malformed("message length out of range"));
    }
    let mut payload = vec![0u8; len as usize - 16];
    r.read_exact(&mut payload).await?;
    match op_code {
        OP_MSG => parse_msg(request_id, &payload).map(Some),
        OP_QUERY => parse_query(request_id, &payload).map(Some),
        other => Err(WireError::UnsupportedOpcode(other)),
    }
}

fn i32_at(b: &[u8], at: usize) -> Result<i32, WireError> {
    let bytes = b
        .get(at..at + 4)
        .ok_or(WireError::Malformed("truncated integer"))?;
    Ok(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Reads one BSON document at the start of `b`, returning it and its length.
fn doc_at(b: &[u8]) -> Result<(Document, usize), WireError> {
    let len = i32_at(b, 0)?;
    if len < 5 || len as usize > b.len() {
        return Err(WireError::Malformed("document length out of range"));
    }
    let doc = Document::from_reader(&mut &b[..len as usize])?;
    Ok((doc, len as usize))
}

fn cstring_at(b: &[u8]) -> Result<(String, usize), WireError> {
    let end = b
        .iter()
        .position(|&c| c == 0)
        .ok_or(WireError::Malformed("unterminated cstring"))?;
    let s =
        std::str::from_utf8(&b[..end]).map_err(|_| WireError::Malformed("cstring not utf-8"))?;
    Ok((s.to_string(), end + 1))
}

fn parse_msg(request_id: i32, payload: &[u8]) -> Result<Request, WireError> {
    let flags = i32_at(payload, 0)? as u32;
    let mut end = payload.len();
    if flags & FLAG_CHECKSUM_PRESENT != 0 {
        end = end
            .checked_sub(4)
            .ok_or(WireError::Malformed("missing checksum"))?;
    }
    let mut at = 4;
    let mut body: Option<Document> = None;
    let mut sequences: Vec<(String, Vec<Bson>)> = Vec::new();
    while at < end {
        let kind = payload[at];
        at += 1;
        let rest = payload
            .get(at..end)
            .ok_or(WireError::Malformed("truncated section"))?;
        match kind {
            0 => {
                let (doc, n) = doc_at(rest)?;
                body = Some(doc);
                at += n;
            }
            1 => {
                let size = i32_at(rest, 0)?;
                if size < 5 || size as usize > rest.len() {
                    return Err(WireError::Malformed("sequence size out of range"));
                }
                let section = &rest[4..size as usize];
                let (identifier, mut off) = cstring_at(section)?;
                let mut docs = Vec::new();
                while off < section.len() {
                    let (doc, n) = doc_at(&section[off..])?;
                    docs.push(Bson::Document(doc));
                    off += n;
                }
                sequences.push((identifier, docs));
                at += size as usize;
            }
            _ => return Err(WireError::Malformed("unknown section kind")),
        }
    }
    let mut body = body.ok_or(WireError::Malformed("no body section"))?;
    for (identifier, docs) in sequences {
        body.insert(identifier, Bson::Array(docs));
    }
    Ok(Request::Msg {
        request_id,
        more_to_come: flags & FLAG_MORE_TO_COME != 0,
        body,
    })
}

fn parse_query(request_id: i32, payload: &[u8]) -> Result<Request, WireError> {
    let rest = payload
        .get(4..)
        .ok_or(WireError::Malformed("truncated query"))?;
    let (collection, n) = cstring_at(rest)?;
    let rest = rest
        .get(n + 8..)
        .ok_or(WireError::Malformed("truncated query"))?;
    let (mut query, _) = doc_at(rest)?;
    // Legacy wrapping: {$query: {...}, $readPreference: ...}
    if let Ok(inner) = query.get_document("$query") {
        query = inner.clone();
    }
    Ok(Request::Query {
        request_id,
        collection,
        query,
    })
}

fn frame(op_code: i32, response_to: i32, body: &[u8]) -> Vec<u8> {
    let len = 16 + body.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    out.extend_from_slice(&rand::random::<i32>().to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&op_code.to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn doc_bytes(doc: &Document) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing a Document into a Vec only fails for documents bson itself cannot encode
    // (e.g. oversized keys); fall back to a generic error reply in that case.
    if doc.to_writer(&mut bytes).is_err() {
        bytes.clear();
        let fallback = bson::doc! { "ok": 0.0, "errmsg": "reply could not be encoded", "code": 1, "codeName": "InternalError" };
        let _ = fallback.to_writer(&mut bytes);
    }
    bytes
}

/// An OP_MSG reply with one kind-0 section.
pub fn encode_msg(response_to: i32, doc: &Document) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0u32.to_le_bytes());
    body.push(0);
    body.extend_from_slice(&doc_bytes(doc));
    frame(OP_MSG, response_to, &body)
}

/// An OP_REPLY carrying one document (answer to OP_QUERY).
pub fn encode_reply(response_to: i32, doc: &Document) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
    body.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    body.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    body.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    body.extend_from_slice(&doc_bytes(doc));
    frame(OP_REPLY, response_to, &body)
}
