//! What the kernel needs besides the file itself to start a program: the interpreter a script's
//! `#!` line names, or the dynamic loader an ELF binary names (`PT_INTERP`). When it is missing
//! (`#!/usr/bin/python3` in an image without Python, a glibc binary in a musl image), `execve`
//! fails with "No such file or directory" although the file is there.

use std::io::Read;
use std::path::{Path, PathBuf};

/// What starts `path` before its own code: `(interpreter, its first argument)`. `None` for a
/// file that needs nothing else (a static binary), or one that cannot be read or parsed (the
/// kernel is the judge then, at each start).
pub(super) fn of(path: &Path) -> Option<(PathBuf, Option<String>)> {
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    match head.get(..4)? {
        [b'#', b'!', ..] => shebang(&head),
        b"\x7fELF" => elf_loader(&head),
        _ => None,
    }
}

/// `#!interpreter [argument]`, as the kernel reads the first line.
fn shebang(head: &[u8]) -> Option<(PathBuf, Option<String>)> {
    let line = head[2..].split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split([' ', '\t']).filter(|w| !w.is_empty());
    let interpreter = PathBuf::from(words.next()?);
    Some((interpreter, words.next().map(str::to_owned)))
}

/// The dynamic loader that a 64-bit little-endian ELF file (x86-64, AArch64) names, when its
/// headers and the name are within `head`, the file's first bytes (as with every linker's
/// layout).
fn elf_loader(head: &[u8]) -> Option<(PathBuf, Option<String>)> {
    if head.get(4..6)? != [2, 1] {
        return None;
    }
    let bytes = |at: usize, n: usize| head.get(at..at.checked_add(n)?);
    let u16_at = |at| Some(u16::from_le_bytes(bytes(at, 2)?.try_into().ok()?));
    let u32_at = |at| Some(u32::from_le_bytes(bytes(at, 4)?.try_into().ok()?));
    let u64_at = |at| usize::try_from(u64::from_le_bytes(bytes(at, 8)?.try_into().ok()?)).ok();
    let table = u64_at(0x20)?;
    let (entry_size, entries) = (usize::from(u16_at(0x36)?), usize::from(u16_at(0x38)?));
    (0..entries).find_map(|i| {
        let header = table.checked_add(i.checked_mul(entry_size)?)?;
        // PT_INTERP: the loader's path, NUL-terminated, at p_offset.
        if u32_at(header)? != 3 {
            return None;
        }
        let name = bytes(u64_at(header + 8)?, u64_at(header + 32)?)?;
        let name = std::str::from_utf8(name.split(|b| *b == 0).next()?).ok()?;
        Some((PathBuf::from(name), None))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_and_binaries_name_what_starts_them() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/usr/bin/env  python3 -u\nprint()\n").unwrap();
        assert_eq!(
            of(&script),
            Some((PathBuf::from("/usr/bin/env"), Some("python3".to_owned())))
        );
        std::fs::write(&script, "#! /bin/sh\n").unwrap();
        assert_eq!(of(&script), Some((PathBuf::from("/bin/sh"), None)));
        std::fs::write(&script, "echo plain\n").unwrap();
        assert_eq!(of(&script), None);
        // The test binary itself is a dynamically linked ELF file.
        let own = std::env::current_exe().unwrap();
        let (loader, _) = of(&own).expect("a loader");
        assert!(loader.exists(), "{loader:?}");
    }
}
