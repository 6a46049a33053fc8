"""Build Wordle's 431-word list from pinned frequency and dictionary packages.

LMRL-Gym plays on `wordle_official_400.txt`: 431 words from the official answer list, used
both as secrets and as the only allowed guesses.  That list is not redistributable, so we
build an equivalent one: common everyday five-letter words, no proper nouns, few inflections.

The rule, applied to wordfreq's English "large" list in its frequency order:

1. the token is exactly five lowercase letters a-z;
2. it is a lowercase entry of the english-words dictionaries (web2 or gcide, case kept:
   a word listed only capitalized, such as `Paris`, is a proper noun);
3. it is not an inflection of a common word (`common`: a dictionary word with zipf
   frequency >= 3.5 that contains a vowel): `-s`/`-es` plurals and verb forms (but not
   `-ss`), `-d`/`-ed` past tenses (`moved`, `added`, `tried` from `try`) and `-ing`
   forms (`going`, `using`); `thing`'s "stem" `th` has no vowel, so it stays;
4. it is not in `EXCLUDED`: the names, nationalities, slang spellings and offensive words
   that pass 1-3 because some dictionary has a homonym (`china`, `smith`, `gonna`);
5. the 431 most frequent survivors are kept and written in alphabetical order.

CLI: `python -m data_gen.wordle_words` rewrites `lmrl/envs/data/wordle_words.txt`;
`--check` only compares.  The header records the package versions: another version of
wordfreq can rank words differently, and the test then reports the difference.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
from pathlib import Path

SIZE = 431  # the original's wordle_official_400.txt holds 431 five-letter words
MIN_STEM_ZIPF = 3.5  # how common a stem must be for `stem + s/ed/ing` to count as its inflection
PINNED = {"wordfreq": "3.1.1", "english-words": "2.0.2"}
OUTPUT = Path(__file__).resolve().parent.parent / "lmrl" / "envs" / "data" / "wordle_words.txt"
COMMAND = "python -m data_gen.wordle_words"
FIVE_LETTERS = re.compile(r"[a-z]{5}")

# Frequent because of a name or a spoken spelling, though a dictionary lists a homonym.
EXCLUDED = frozenset({
    # people's names
    "barry", "billy", "blake", "bobby", "clark", "harry", "henry", "jerry", "jimmy", "kelly",
    "larry", "laura", "lewis", "maria", "mason", "nancy", "perry", "peter", "roger", "smith",
    "terry", "tommy", "trump",
    # places, peoples, teams
    "china", "costa", "dutch", "inter", "japan", "swiss", "welsh",
    # spoken contractions
    "gonna", "gotta", "wanna",
    # offensive, or dropped from the official answers for that reason
    "bitch", "pussy", "slave",
})


def _versions() -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in PINNED}


def _sources():
    """wordfreq's frequency-ordered English list and the case-kept dictionary entries."""
    import wordfreq
    from english_words import get_english_words_set

    dictionary = get_english_words_set(["web2", "gcide"], alpha=False, lower=False)
    return wordfreq, dictionary


def build_words(size: int = SIZE) -> list[str]:
    """The `size` words chosen by the module docstring's rule, alphabetically sorted."""
    wordfreq, dictionary = _sources()

    def common(stem: str) -> bool:
        return (
            len(stem) >= 2 and stem in dictionary and any(v in stem for v in "aeiouy")
            and wordfreq.zipf_frequency(stem, "en", wordlist="large") >= MIN_STEM_ZIPF
        )

    def inflected(word: str) -> bool:
        if word.endswith("s") and not word.endswith("ss"):
            return common(word[:-1]) or (word.endswith("es") and common(word[:-2]))
        if word.endswith("ed"):
            return common(word[:-1]) or common(word[:-2]) or (word.endswith("ied") and common(word[:-3] + "y"))
        if word.endswith("ying") and common(word[:-4] + "ie"):
            return True
        if word.endswith("ing"):
            stem = word[:-3]
            return any(v in stem for v in "aeiouy") and (common(stem) or common(stem + "e"))
        return False

    chosen: list[str] = []
    for token in wordfreq.iter_wordlist("en", wordlist="large"):
        if FIVE_LETTERS.fullmatch(token) and token in dictionary and token not in EXCLUDED and not inflected(token):
            chosen.append(token)
            if len(chosen) == size:
                return sorted(chosen)
    raise RuntimeError(f"only {len(chosen)} words pass the filters; wanted {size}")


def render(words: list[str]) -> str:
    """The committed file's text: `#` header lines, then one word per line."""
    versions = ", ".join(f"{name}=={v}" for name, v in _versions().items())
    header = [
        "# Wordle word list (secrets and allowed guesses): common five-letter English words.",
        "# source: wordfreq 'large' English frequency order, intersected with english-words web2+gcide",
        "#   lowercase entries, minus inflections and names (rule: data_gen/wordle_words.py)",
        f"# packages: {versions}",
        f"# size: {len(words)}",
        f"# regenerate: {COMMAND}",
    ]
    return "\n".join(header + words) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the Wordle word list from wordfreq and english-words.")
    parser.add_argument("--out", default=str(OUTPUT))
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args(argv)
    if _versions() != PINNED:
        print(f"warning: installed {_versions()} differ from the pinned {PINNED}; the list may differ")
    text = render(build_words())
    out = Path(args.out)
    if args.check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if same else 'DIFFERS from the rebuilt list'}")
        raise SystemExit(0 if same else 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {SIZE} words to {out}")


if __name__ == "__main__":
    main()
