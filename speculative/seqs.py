"""The llama.cpp sequences of one context, by what each caches: FULL the full prompt of where
the user works; SHORT and the next SHORT_SEQS - 1 the short prompts that answer at once while
a full one is read, one per place typed at lately; from FIRST_BRANCH on, candidates' branches
(cells shared with their source)."""

FULL, SHORT = 0, 1
SHORT_SEQS = 2  # short prompts kept: two windows typing at once would otherwise read theirs anew each key
FIRST_BRANCH = SHORT + SHORT_SEQS
MAX_SEQS = FIRST_BRANCH + 8
