//! "Did you mean ...?" for a misspelt name (a protocol, a consistency level): the nearest known name by
//! edit distance, if it is near enough to be a slip rather than another word.

/// The optimal-string-alignment distance between `a` and `b` (case-insensitive): insertions, deletions,
/// substitutions and transpositions of two adjacent characters each count one (`nmis` is one from `nmsi`).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // d[i][j]: the distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// The candidate nearest to `input`, if it is within a third of `input`'s length (at least one edit): a
/// slip of the keyboard, not another word. Ties go to the earlier candidate.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (input.chars().count() / 3).max(1);
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = edit_distance(input, c);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slips_are_matched_and_other_words_are_not() {
        assert_eq!(edit_distance("nmis", "nmsi"), 1);
        assert_eq!(edit_distance("contrarain", "contrarian"), 1);
        assert_eq!(edit_distance("causl", "causal"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        let protocols = ["cops", "contrarian", "cv", "nmsi", "rc", "si", "psi"];
        assert_eq!(did_you_mean("nmis", protocols), Some("nmsi"));
        assert_eq!(did_you_mean("contrarain", protocols), Some("contrarian"));
        assert_eq!(did_you_mean("NMIS", protocols), Some("nmsi"));
        assert_eq!(did_you_mean("paxos", protocols), None);
        assert_eq!(did_you_mean("zz", protocols), None);
        let levels = ["causal", "strict-ser", "ser"];
        assert_eq!(did_you_mean("strict-serr", levels), Some("strict-ser"));
        assert_eq!(did_you_mean("causl", levels), Some("causal"));
        assert_eq!(did_you_mean("snapshot-isolation-please", levels), None);
    }
}
