"""Prepare the data of the mlrb `char-lm` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Generates, with numpy from a fixed seed, an English-like corpus of short
stories from a probabilistic grammar: a few hundred words (names, nouns with
regular and irregular plurals, verbs with regular and irregular past tenses,
adjectives, adverbs, function words), grouped in topics. Every paragraph
keeps one topic, one tense and one main character, and sentences come in
several shapes (statements with prepositional phrases, "a"/"an" chosen by
the next word, subject-verb agreement, subordinate clauses, questions,
quoted speech, numbers and years), with capitalisation and punctuation.
One paragraph per line.

Writes
  <public_dir>/data/train.txt     about 300,000 characters of training text
  <public_dir>/data/valid.txt     about 30,000 characters of validation text
  <public_dir>/data/vocab.json    {"chars": [...]}: the alphabet, in model index order
  <hidden_dir>/test.txt           about 40,000 characters of held-out text
  <hidden_dir>/vocab.json         the same alphabet
The output is byte-identical on every run.
"""
import json
import os

import numpy as np

import mlrb_eval

SEED = 4711
# The alphabet, in model index order: newline, space, punctuation, digits,
# upper-case and lower-case letters (some never occur in the text).
ALPHABET = ["\n", " ", "!", '"', "'", ",", ".", "?"] + [chr(c) for c in range(ord("0"), ord("9") + 1)] \
    + [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
TRAIN_CHARS, VALID_CHARS, TEST_CHARS = 300_000, 30_000, 40_000

NAMES = {
    "she": "Anna Clara Emma Grace Iris Lucy Nora Rosa Vera Maud Elsie Ada".split(),
    "he": "Ben David Felix Henry Jack Max Oscar Paul Sam Tom Will Arthur".split(),
}
IRREGULAR_PLURAL = {
    "child": "children", "mouse": "mice", "man": "men", "woman": "women", "fish": "fish",
    "sheep": "sheep", "knife": "knives", "leaf": "leaves", "wolf": "wolves", "goose": "geese",
    "tooth": "teeth", "foot": "feet", "loaf": "loaves", "shelf": "shelves", "deer": "deer",
}
IRREGULAR_PAST = {
    "see": "saw", "find": "found", "take": "took", "bring": "brought", "catch": "caught",
    "buy": "bought", "make": "made", "hold": "held", "keep": "kept", "leave": "left",
    "eat": "ate", "give": "gave", "throw": "threw", "steal": "stole", "hide": "hid",
    "break": "broke", "build": "built", "sell": "sold", "feed": "fed", "write": "wrote",
    "read": "read", "draw": "drew", "sing": "sang", "swim": "swam", "run": "ran",
    "sit": "sat", "sleep": "slept", "go": "went", "come": "came", "fall": "fell",
    "fly": "flew", "wake": "woke", "stand": "stood", "lose": "lost", "win": "won",
    "ride": "rode", "shake": "shook", "teach": "taught", "think": "thought", "sweep": "swept",
}
TOPICS = {
    "farm": dict(
        nouns="farmer cow pig horse goose sheep barn field fence tractor hen egg apple wagon mouse".split(),
        places="barn field orchard meadow stable yard".split(),
        verbs="feed milk chase plant pick carry sell count fix wash".split(),
        adjs="muddy old red hungry tired golden noisy quiet".split(),
    ),
    "sea": dict(
        nouns="sailor boat fish net wave gull anchor island shell lighthouse captain rope storm whale".split(),
        places="harbour beach island deck cove pier".split(),
        verbs="catch pull mend steer follow watch throw drag tie lift".split(),
        adjs="salty grey wild calm blue wet cold rough".split(),
    ),
    "city": dict(
        nouns="baker driver bus street shop clock tower bridge train ticket lamp market crowd window".split(),
        places="market station square bakery library bridge".split(),
        verbs="buy sell wait visit clean open close paint read count".split(),
        adjs="busy tall bright narrow crowded dusty new famous".split(),
    ),
    "forest": dict(
        nouns="wolf deer owl fox tree leaf path hunter cabin river stone mushroom bear squirrel".split(),
        places="forest clearing valley cave river hill".split(),
        verbs="follow hide find climb cross gather hunt track build hear".split(),
        adjs="dark green ancient silent deep tall wild hollow".split(),
    ),
    "kitchen": dict(
        nouns="cook knife loaf pot cake oven spoon plate cup kettle soup onion shelf table cat".split(),
        places="kitchen pantry garden cellar table window".split(),
        verbs="bake cut stir taste wash boil fill drop break serve".split(),
        adjs="hot warm sweet fresh sharp empty heavy clean".split(),
    ),
    "school": dict(
        nouns="teacher pupil book lesson map desk pencil child bell board letter story garden ball".split(),
        places="classroom school garden hall playground library".split(),
        verbs="read write draw teach learn count copy explain lose win".split(),
        adjs="young clever careful long short funny strict patient".split(),
    ),
}
INTRANSITIVE = "walk run sleep laugh wait smile sing swim sit stand shout whisper listen hurry rest".split()
ADVERBS = "quickly slowly quietly carefully happily suddenly finally often never always again soon".split()
PREPS = "in on under near behind across through into over beside".split()
NUMBERS = "two three four five six seven eight nine ten twelve".split()
TIMES = ["in the morning", "in the evening", "at night", "after lunch", "before dawn",
         "on Sunday", "on Monday", "in winter", "in summer", "at noon", "that day", "every day"]
SPEECH = ["said", "asked", "shouted", "whispered", "replied", "laughed"]


def plural(noun):
    if noun in IRREGULAR_PLURAL:
        return IRREGULAR_PLURAL[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def third_person(verb):
    if verb == "go":
        return "goes"
    if verb.endswith(("s", "x", "ch", "sh")):
        return verb + "es"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def past(verb):
    if verb in IRREGULAR_PAST:
        return IRREGULAR_PAST[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    if verb in ("stop", "drop", "plan", "chat", "mop", "hug", "grab", "stir"):
        return verb + verb[-1] + "ed"
    return verb + "ed"


class Writer:
    def __init__(self, rng):
        self.rng = rng

    def pick(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p):
        return self.rng.random() < p

    # ---- phrases ----
    def article(self, next_word):
        return "an" if next_word[0] in "aeiou" else "a"

    def noun_phrase(self, topic, number=None):
        """Returns (text, is_plural)."""
        t = TOPICS[topic]
        noun = self.pick(t["nouns"])
        is_plural = self.chance(0.35) if number is None else number
        adj = self.pick(t["adjs"]) if self.chance(0.45) else None
        head = plural(noun) if is_plural else noun
        words = ([adj] if adj else []) + [head]
        r = self.rng.random()
        if is_plural:
            if r < 0.45:
                det = "the"
            elif r < 0.6:
                det = self.pick(NUMBERS)
            elif r < 0.75:
                det = "some"
            elif r < 0.85:
                det = self.pick(["his", "her", "their"])
            else:
                det = None
        else:
            if r < 0.5:
                det = "the"
            elif r < 0.8:
                det = self.article(words[0])
            elif r < 0.9:
                det = self.pick(["his", "her", "their", "this", "that"])
            else:
                det = "every"
        return " ".join(([det] if det else []) + words), is_plural

    def place(self, topic):
        return self.pick(PREPS) + " the " + self.pick(TOPICS[topic]["places"])

    def verb_form(self, verb, tense, plural_subject):
        if tense == "past":
            return past(verb)
        return verb if plural_subject else third_person(verb)

    def clause(self, ctx, subject=None):
        """An independent clause without final punctuation."""
        topic, tense = ctx["topic"], ctx["tense"]
        if subject is None:
            r = self.rng.random()
            if r < 0.35:
                subject, plural_subject = ctx["name"], False
            elif r < 0.5:
                subject, plural_subject = ctx["pronoun"], False
            else:
                subject, plural_subject = self.noun_phrase(topic)
        else:
            subject, plural_subject = subject
        r = self.rng.random()
        if r < 0.55:
            verb = self.pick(TOPICS[topic]["verbs"])
            obj, _ = self.noun_phrase(topic)
            words = [subject, self.verb_form(verb, tense, plural_subject), obj]
        elif r < 0.8:
            verb = self.pick(INTRANSITIVE)
            words = [subject, self.verb_form(verb, tense, plural_subject)]
        else:
            be = ("were" if plural_subject else "was") if tense == "past" else ("are" if plural_subject else "is")
            words = [subject, be, self.pick(TOPICS[topic]["adjs"])]
        if self.chance(0.3):
            words.append(self.pick(ADVERBS))
        if self.chance(0.45):
            words.append(self.place(topic))
        return " ".join(words)

    def sentence(self, ctx):
        r = self.rng.random()
        if r < 0.38:
            s = self.clause(ctx)
            if self.chance(0.25):
                s = self.pick(TIMES) + ", " + s if self.chance(0.5) else s + " " + self.pick(TIMES)
            return s[0].upper() + s[1:] + "."
        if r < 0.52:
            conj = self.pick(["and", "but", "so", "because", "while"])
            return cap(self.clause(ctx) + ", " + conj + " " + self.clause(ctx)) + "."
        if r < 0.62:
            sub = self.pick(["When", "After", "Before", "Although", "Because"])
            return sub + " " + self.clause(ctx) + ", " + self.clause(ctx) + "."
        if r < 0.72:
            np_, is_plural = self.noun_phrase(ctx["topic"], number=self.chance(0.5))
            be = ("were" if is_plural else "was") if ctx["tense"] == "past" else ("are" if is_plural else "is")
            return f"There {be} {np_} {self.place(ctx['topic'])}."
        if r < 0.8:
            aux = "Did" if ctx["tense"] == "past" else "Does"
            subject = ctx["name"] if self.chance(0.5) else self.noun_phrase(ctx["topic"], number=False)[0]
            verb = self.pick(TOPICS[ctx["topic"]]["verbs"])
            obj, _ = self.noun_phrase(ctx["topic"])
            return f"{aux} {subject} {verb} {obj}?"
        if r < 0.92:
            # Quoted speech: always in the present tense.
            speaker = ctx["name"] if self.chance(0.7) else self.pick(NAMES[self.pick(["he", "she"])])
            inner_ctx = dict(ctx, tense="present")
            inner = cap(self.clause(inner_ctx))
            verb = self.pick(SPEECH)
            if self.chance(0.3):
                return f'"{inner}?" asked {speaker}.'
            if self.chance(0.5):
                return f'"{inner}," {verb} {speaker}.'
            return f'{speaker} {verb}, "{inner}!"'
        if r < 0.96:
            year = int(self.rng.integers(1850, 1960))
            return f"In {year}, {self.clause(ctx)}."
        hour = int(self.rng.integers(1, 13))
        return f"At {hour} o'clock, {self.clause(ctx)}."

    def paragraph(self):
        gender = self.pick(["he", "she"])
        ctx = {
            "topic": self.pick(sorted(TOPICS)),
            "tense": "past" if self.chance(0.7) else "present",
            "name": self.pick(NAMES[gender]),
            "pronoun": gender,
        }
        n = int(self.rng.integers(3, 9))
        return " ".join(self.sentence(ctx) for _ in range(n))

    def text(self, n_chars):
        paragraphs, size = [], 0
        while size < n_chars:
            p = self.paragraph()
            paragraphs.append(p)
            size += len(p) + 1
        return "\n".join(paragraphs) + "\n"


def cap(s):
    return s[0].upper() + s[1:]


def main():
    data_dir, hidden_dir = mlrb_eval.prepare_args()
    writer = Writer(np.random.default_rng(SEED))
    train = writer.text(TRAIN_CHARS)
    valid = writer.text(VALID_CHARS)
    test = writer.text(TEST_CHARS)
    chars = ALPHABET
    assert set(train + valid + test) <= set(chars), "text outside the alphabet"
    vocab = json.dumps({"chars": chars}, ensure_ascii=True) + "\n"
    for path, content in [
        (os.path.join(data_dir, "train.txt"), train),
        (os.path.join(data_dir, "valid.txt"), valid),
        (os.path.join(data_dir, "vocab.json"), vocab),
        (os.path.join(hidden_dir, "test.txt"), test),
        (os.path.join(hidden_dir, "vocab.json"), vocab),
    ]:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(content)


if __name__ == "__main__":
    main()
