//! Classifying errors returned by the API server.

/// Whether `error` is an API Status error with HTTP code `code`.
pub fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// Whether `error` means the object is already gone (404) or was replaced
/// (409, a failed uid precondition): a delete that needs no retry.
pub fn is_gone(error: &kube::Error) -> bool {
    is_status(error, 404) || is_status(error, 409)
}
