//! Character classes used by the pre-tokenizers, and GPT-2's byte <-> printable-char mapping.

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// `\p{L}`: any letter category (Lu, Ll, Lt, Lm, Lo).
#[inline]
pub fn is_letter(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    matches!(
        get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

/// `\p{N}`: Nd, Nl, No (the same set as `char::is_numeric`).
#[inline]
pub fn is_number(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    c.is_numeric()
}

/// `\s` as llama.cpp defines it: the Unicode White_Space property, which is `char::is_whitespace`.
#[inline]
pub fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// GPT-2's reversible byte -> char mapping: printable Latin-1 bytes map to themselves, the other
/// 68 bytes to U+0100.. in order, so every byte string becomes printable text without spaces.
pub fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable =
            (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let cp = if printable {
            b as u32
        } else {
            let cp = next;
            next += 1;
            cp
        };
        // cp is below 0x200, always a valid scalar value.
        table[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// The inverse mapping of [`byte_to_char_table`] as a lookup from char to byte.
pub fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x143 => {
            // The n-th non-printable byte (in byte order) maps to U+0100 + n.
            let n = cp - 0x100;
            (0..=255u8)
                .filter(|b| {
                    !((b'!'..=b'~').contains(b)
                        || (0xA1..=0xAC).contains(b)
                        || (0xAE..=0xFF).contains(b))
                })
                .nth(n as usize)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_mapping_round_trips() {
        let t = byte_to_char_table();
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(t[b as usize]), Some(b), "byte {b}");
        }
        assert_eq!(char_to_byte('\u{151}'), None);
        assert_eq!(char_to_byte('\u{143}'), Some(0xAD)); // the last stand-in is the soft hyphen
    }

    #[test]
    fn classes() {
        assert!(is_letter('é') && is_letter('中') && !is_letter('1') && !is_letter('\u{0301}'));
        assert!(is_number('٣') && is_number('½') && !is_number('a'));
        assert!(is_space('\u{3000}') && is_space('\u{85}') && !is_space('\u{200B}'));
    }
}
