//! What the kernel needs besides the file itself to start a program: the interpreter a script's
//! `#!` line names, or the dynamic loader an ELF binary names (`PT_INTERP`). When it is missing
//! (`#!/usr/bin/python3` in an image without Python, a glibc binary in a musl image), `execve`
//! fails with "No such file or directory" although the file is there. And an ELF file the kernel
//! refuses (cut short, no program, built for another machine): `execvp` then hands it to
//! `/bin/sh`, which fails with 2 or 127.

use std::io::Read;
use std::path::{Path, PathBuf};

/// What starts `path` before its own code: `(interpreter, its first argument)`. `None` for a
/// file that needs nothing else (a static binary), or one that cannot be read or parsed (the
/// kernel is the judge then, at each start). `Err`: why this machine cannot run it.
pub(super) fn of(path: &Path) -> Result<Option<(PathBuf, Option<String>)>, String> {
    let mut head = Vec::with_capacity(4096);
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let len = file.metadata().map_or(u64::MAX, |m| m.len());
    if file.take(4096).read_to_end(&mut head).is_err() {
        return Ok(None);
    }
    match head.get(..4) {
        Some([b'#', b'!', ..]) => Ok(shebang(&head)),
        Some(b"\x7fELF") => elf(&head, len),
        _ => Ok(None),
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

/// The dynamic loader that an ELF file names, once it is one the kernel runs here. The program
/// headers are read when they are within `head`, the file's first bytes (as with every
/// linker's layout); `len` is the file's.
fn elf(head: &[u8], len: u64) -> Result<Option<(PathBuf, Option<String>)>, String> {
    let unfit = |why: &str| Err(format!("is not a program this machine can run: {why}"));
    // By class: the header's size, a program header's, where its offset and size are, and where
    // the header keeps the table's offset, entry size and count.
    let wide = head.get(4) == Some(&2);
    let (header, entry, offset_at, size_at, at) = match wide {
        true => (64, 56, 8, 32, [0x20, 0x36, 0x38]),
        false => (52, 32, 4, 16, [0x1c, 0x2a, 0x2c]),
    };
    if head.len() < header || !matches!(head[4..6], [1 | 2, 1 | 2]) {
        return unfit("its ELF header is cut short or corrupt");
    }
    if (head[5] == 1) != cfg!(target_endian = "little") {
        return unfit("it is built for a machine of the other byte order");
    }
    let bytes = |at: usize, n: usize| head.get(at..at.checked_add(n)?);
    let u16_at = |at| Some(u16::from_ne_bytes(bytes(at, 2)?.try_into().ok()?));
    let u32_at = |at| Some(u32::from_ne_bytes(bytes(at, 4)?.try_into().ok()?));
    let word_at = |at: usize| match wide {
        true => Some(u64::from_ne_bytes(bytes(at, 8)?.try_into().ok()?)),
        false => u32_at(at).map(u64::from),
    };
    if !matches!(u16_at(0x10), Some(2 | 3)) {
        return unfit("it is an ELF file but no program (an object file or a core dump?)");
    }
    let (machine, here) = (u16_at(0x12).unwrap_or_default(), std::env::consts::ARCH);
    // This kernel's own machine, and the 32-bit one it may run beside it; none when a
    // binfmt_misc handler (an emulator) may run others.
    let runs: &[(bool, u16)] = match here {
        _ if std::fs::read_dir("/proc/sys/fs/binfmt_misc").is_ok_and(|d| d.count() > 2) => &[],
        "x86_64" => &[(true, 62), (false, 3)],
        "aarch64" => &[(true, 183), (false, 40)],
        _ => &[],
    };
    if !runs.is_empty() && !runs.contains(&(wide, machine)) {
        let name = match machine {
            3 => "x86",
            40 => "ARM",
            62 => "x86-64",
            183 => "AArch64",
            243 => "RISC-V",
            _ => "another machine",
        };
        let bits = if wide { 64 } else { 32 };
        let why = format!(
            "it is built for {name} (ELF machine {machine}, {bits}-bit), and this one is {here}"
        );
        return unfit(&why);
    }
    let (Some(table), Some(entry_size), Some(entries)) =
        (word_at(at[0]), u16_at(at[1]), u16_at(at[2]))
    else {
        return Ok(None);
    };
    if entry_size != entry || entries == 0 {
        return unfit("its program headers are corrupt");
    }
    if table.saturating_add(u64::from(entry_size) * u64::from(entries)) > len {
        return unfit("it is cut short: its program headers end past the file's end");
    }
    let mut loader = None;
    for i in 0..entries {
        // Within the file: the table's end was checked against its length.
        let at = usize::try_from(table + u64::from(i) * u64::from(entry_size)).ok();
        let field = |offset: usize| word_at(at?.checked_add(offset)?);
        let (Some(kind), Some(offset), Some(size)) =
            (at.and_then(u32_at), field(offset_at), field(size_at))
        else {
            return Ok(None);
        };
        match kind {
            // PT_LOAD: mapped from the file.
            1 if offset.saturating_add(size) > len => {
                return unfit("it is cut short: a segment ends past the file's end");
            }
            // PT_INTERP, the first: the loader's path, NUL-terminated, at p_offset.
            // The kernel refuses a path of fewer than 2 bytes (its NUL included).
            3 if size < 2 => return unfit("its loader entry (PT_INTERP) is corrupt"),
            3 if loader.is_none() => {
                let at = usize::try_from(offset).ok().zip(usize::try_from(size).ok());
                let name = at.and_then(|(at, n)| bytes(at, n));
                let name =
                    name.and_then(|n| std::str::from_utf8(n.split(|b| *b == 0).next()?).ok());
                loader = Some(name.map(|name| (PathBuf::from(name), None)));
            }
            _ => {}
        }
    }
    Ok(loader.flatten())
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
            of(&script).unwrap(),
            Some((PathBuf::from("/usr/bin/env"), Some("python3".to_owned())))
        );
        std::fs::write(&script, "#! /bin/sh\n").unwrap();
        assert_eq!(of(&script).unwrap(), Some((PathBuf::from("/bin/sh"), None)));
        std::fs::write(&script, "echo plain\n").unwrap();
        assert_eq!(of(&script).unwrap(), None);
        // The test binary itself is a dynamically linked ELF file.
        let own = std::env::current_exe().unwrap();
        let (loader, _) = of(&own).unwrap().expect("a loader");
        assert!(loader.exists(), "{loader:?}");
        // A loader entry of no length, which the kernel refuses.
        let mut bytes = std::fs::read(&own).unwrap();
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let (table, entries) = (word(0x20), usize::from(bytes[0x38]));
        let interp = (0..entries)
            .map(|i| table + i * 56)
            .find(|&at| bytes[at..at + 4] == 3u32.to_le_bytes())
            .unwrap();
        bytes[interp + 32..interp + 40].copy_from_slice(&0u64.to_le_bytes());
        let cut = dir.path().join("no-loader");
        std::fs::write(&cut, bytes).unwrap();
        let err = of(&cut).expect_err("refused");
        assert!(
            err.contains("its loader entry (PT_INTERP) is corrupt"),
            "{err}"
        );
    }
}
