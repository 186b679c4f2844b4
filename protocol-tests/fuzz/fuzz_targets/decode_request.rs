//! Request decoding, exactly as the broker runs it on every frame: header,
//! version check against our table, body. Any input must give a request or an
//! error, never a panic or an abort.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: sluice::alloc::LazyHugeAlloc = sluice::alloc::LazyHugeAlloc;

fuzz_target!(|data: &[u8]| {
    let mut frame = bytes::Bytes::copy_from_slice(data);
    let _ = sluice::protocol::dispatch::decode_request(&mut frame);
});
