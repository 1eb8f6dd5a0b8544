//! How the process's allocator (glibc's malloc in the image) gives memory
//! back. Two habits of glibc make a restarted operator's resident memory
//! twice its steady state's (`lab bench`, BENCHMARKS.md): each thread that
//! allocates under contention gets an arena of its own (up to eight per
//! core), and memory freed in the middle of an arena stays resident until
//! `malloc_trim`. The restart is when both bite most: every watch's first list
//! is decoded at once, then slimmed into the caches and freed.

use std::time::Duration;

/// Caps glibc's arenas at two: the operator's threads are the
/// runtime's workers and its blocking pool, and allocation is a small part
/// of their work, so contention on two arenas costs little.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a malloc parameter (under the main arena's
    // lock); `main` calls it before the runtime starts its threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// How often free memory is returned while the operator runs.
const RELEASE_EVERY: Duration = Duration::from_secs(60);

/// Returns the free memory of every arena to the system (glibc's
/// `malloc_trim` releases free pages anywhere in an arena, not only at its
/// top): once the watches' first lists are cached, and after that every
/// minute, so what a burst of passes freed does not stay resident.
pub async fn release_free_memory_every_minute() {
    let mut every = tokio::time::interval(RELEASE_EVERY);
    loop {
        every.tick().await;
        release_free_memory();
    }
}

/// Returns the free memory of every arena to the system now.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the arenas' locks itself and touches only
    // free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many arenas glibc may create.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;
