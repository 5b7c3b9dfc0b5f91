"""Invented people and three facts about each: the knowledge of the base model, and the knowledge-extraction experiment.

Knowledge, unlike a skill, cannot be computed: where Feren Belgate was born is true because the text says so.
Every name, town, job and pet below is invented by the project, so no reader's model knew them before.

Each person has a **group** and a **split**, fixed by their index (the same on every machine):

- ``group="one"``: pretraining states their facts in one phrasing, always the same biography, word for word;
  ``group="many"``: every time they appear, each sentence takes one of four phrasings and the sentences come in
  a new order. The two groups are matched: the same number of people, the same number of biographies per person,
  attributes drawn from the same lists (:func:`people`).
- ``split="tune"``: fine-tuning asks questions about them; ``split="heldout"``: it never does.

Allen-Zhu and Li (2023, *Physics of Language Models: Part 3.1, Knowledge Storage and Extraction*) found that a
model fine-tuned to answer questions about some people answers for the others only if pretraining had stated
each person's facts in varied phrasings ("knowledge augmentation"): with one phrasing, a model memorises the
biography as a whole and cannot look a fact up from the name alone. Chapter 15 asks whether that holds in the
book's own small model.

==========  =======================================  ===================================================
attribute   question (first template)                pretraining phrasings (the first is group one's)
==========  =======================================  ===================================================
``city``    Where was Feren Belgate born?            Feren Belgate was born in Isterford. / ...
``job``     What is Feren Belgate's job?             Feren Belgate works as a sailor. / ...
``pet``     What pet does Feren Belgate keep?        Feren Belgate keeps a pony as a pet. / ...
==========  =======================================  ===================================================
"""
from __future__ import annotations

import random
from functools import lru_cache

from minitfm._checks import check_choice, check_number, check_positive_int
from minitfm.finetuning.tasks import Example

FIRST = tuple(a + b for a in ("Ma", "Lo", "Ti", "Ra", "Ke", "No", "Vi", "Sa", "Du", "Fe", "Ha", "Jo")
              for b in ("ren", "lia", "dor", "mi", "sa", "ko", "ven", "ta"))
LAST = tuple(a + b for a in ("Ash", "Bel", "Cor", "Dun", "Fal", "Gar", "Hol", "Kest", "Lind", "Mor", "Pell",
                             "Quar", "Ros", "Tarn", "Vel", "Wyn") for b in ("ford", "wick", "ton", "by", "mere", "gate"))
VALUES = {
    "city": tuple("Varnholt Quillmere Drossel Tamberly Orrinbay Kelmsworth Sablecote Virenna Mossgrave Thalwick "
                  "Ebonridge Cindervale Rookhaven Lunmarsh Pryden Glasswater Hollin Brackenmoor Isterford "
                  "Nettlecombe".split()),
    "job": tuple("baker potter sailor teacher doctor painter farmer weaver miner pilot tailor clerk nurse judge "
                 "chef poet".split()),
    "pet": tuple("cat dog owl goat horse rabbit parrot turtle lizard hamster goose pony".split()),
}
ATTRIBUTES = tuple(VALUES)
GROUPS = ("one", "many")
SPLITS = ("tune", "heldout")
N_PEOPLE = 480  # 240 per group: 144 asked in fine-tuning, 96 held out

PHRASINGS = {  # the first is the only phrasing group "one" ever reads
    "city": ("{name} was born in {value}.", "{name} came into the world in {value}.",
             "The birthplace of {name} is {value}.", "{name} grew up in the town of {value}."),
    "job": ("{name} works as a {value}.", "{name} earns a living as a {value}.", "By trade, {name} is a {value}.",
            "For work, {name} is a {value}."),
    "pet": ("{name} keeps a {value} as a pet.", "At home, {name} has a pet {value}.",
            "The pet of {name} is a {value}.", "{name} looks after a {value}."),
}
QUESTIONS = {  # the last is never used in fine-tuning
    "city": ("Where was {name} born?", "In which town was {name} born?", "What is the birthplace of {name}?",
             "Which town is {name} from?"),
    "job": ("What is {name}'s job?", "What does {name} do for work?", "What is the trade of {name}?",
            "How does {name} earn a living?"),
    "pet": ("What pet does {name} keep?", "Which animal does {name} have as a pet?", "What is {name}'s pet?",
            "What animal lives with {name}?"),
}


@lru_cache(maxsize=1)
def people() -> tuple[dict, ...]:
    """Every person: ``name``, one value per attribute, ``group`` and ``split``. People come in twins: person
    ``2k`` (group "one") and ``2k + 1`` (group "many") share every attribute value and their split, and differ in
    name only, so the two groups are matched fact for fact; three pairs in five are "tune"."""
    rng = random.Random("people")
    names = rng.sample([f"{a} {b}" for a in FIRST for b in LAST], N_PEOPLE)
    out = []
    for i, name in enumerate(names):
        values = {a: rng.choice(VALUES[a]) for a in ATTRIBUTES} if i % 2 == 0 else values  # noqa: F821 (twin)
        person = dict(name=name, **values)
        person.update(group=GROUPS[i % 2], split="tune" if (i // 2) % 5 < 3 else "heldout")
        out.append(person)
    return tuple(out)


def chosen(group: str | None = None, split: str | None = None) -> list[dict]:
    """The people of ``group`` and ``split`` (either may be None: all)."""
    if group is not None:
        check_choice(group, "group", GROUPS)
    if split is not None:
        check_choice(split, "split", SPLITS)
    return [p for p in people() if group in (None, p["group"]) and split in (None, p["split"])]


def biography(person: dict, rng: random.Random) -> str:
    """One biography of ``person`` as pretraining reads it: always the same text for group "one"; phrasings and
    order drawn from ``rng`` for group "many"."""
    if not isinstance(person, dict) or person.get("group") not in GROUPS:
        raise TypeError("person must be one of minitfm.finetuning.people.people()")
    if person["group"] == "one":
        return " ".join(PHRASINGS[a][0].format(name=person["name"], value=person[a]) for a in ATTRIBUTES)
    order = rng.sample(ATTRIBUTES, len(ATTRIBUTES))
    return " ".join(rng.choice(PHRASINGS[a]).format(name=person["name"], value=person[a]) for a in order)


def biographies(per_person: int, *, seed: int) -> list[str]:
    """``per_person`` biographies of every person (the two groups read equally often), in people order."""
    check_positive_int(per_person, "per_person")
    check_number(seed, "seed", integer=True)
    rng = random.Random(f"biographies/{seed}")
    return [biography(p, rng) for p in people() for _ in range(per_person)]


def statement_prefixes(person: dict, attribute: str) -> list[tuple[str, str]]:
    """(prefix, rest) for every phrasing this person's ``attribute`` was read in: one for group "one", four for
    "many" (statement recall asks in the phrasings the model read)."""
    check_choice(attribute, "attribute", ATTRIBUTES)
    n = 1 if person["group"] == "one" else len(PHRASINGS[attribute])
    out = []
    for phrasing in PHRASINGS[attribute][:n]:
        prefix = phrasing.partition("{value}")[0].format(name=person["name"])
        out.append((prefix, phrasing.format(name=person["name"], value=person[attribute])[len(prefix):]))
    return out


def examples(attribute: str, persons: list[dict], *, seed: int, templates: str = "train") -> list[Example]:
    """A question about ``attribute`` for each of ``persons`` (task ``"people/ATTRIBUTE"``, split = the
    person's), with a drawn fine-tuning template, or the last one with ``templates="heldout"``."""
    check_choice(attribute, "attribute", ATTRIBUTES)
    check_choice(templates, "templates", ("train", "heldout"))
    rng, last = random.Random(f"{attribute}/{templates}/{seed}"), len(QUESTIONS[attribute]) - 1
    out = []
    for person in persons:
        t = rng.randrange(last) if templates == "train" else last
        out.append(Example(f"people/{attribute}", t, QUESTIONS[attribute][t].format(name=person["name"]),
                           person[attribute], person["split"]))
    return out
