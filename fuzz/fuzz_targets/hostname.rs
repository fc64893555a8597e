//! Fuzz target `hostname`: see `rouse_fuzz::targets::hostname`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rouse_fuzz::targets::hostname(data));
