"""Prepare the data of the mlrb `spaceship` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Generates, with numpy from a fixed seed, the passenger list of a fictional
interstellar liner (modelled on Kaggle's "Spaceship Titanic"): passengers
travel in groups, come from one of three planets, sleep in cryo-chambers or
spend money on board, and have a cabin "deck/number/side". Whether each one
was "Transported" to another dimension follows a nonlinear rule of these
attributes (cryo-sleep, spending patterns, age, planet, deck, side, bands
of cabin numbers, group size) plus chance; about 2 % of every feature is
missing. Passengers are split into train and test by group.

Writes
  <public_dir>/data/train.csv              PassengerId,<features>,Transported
  <public_dir>/data/test.csv               PassengerId,<features>
  <public_dir>/data/sample_submission.csv  PassengerId,Transported (all False)
  <hidden_dir>/answers.csv                 PassengerId,Transported
The output is byte-identical on every run.
"""
import os

import numpy as np

import mlrb_eval

SEED = 2912
N_GROUPS = 6400
TEST_GROUP_FRACTION = 0.3
MISSING_RATE = 0.02

PLANETS = ["Earth", "Europa", "Mars"]
PLANET_P = [0.54, 0.25, 0.21]
DESTINATIONS = ["TRAPPIST-1e", "PSO J318.5-22", "55 Cancri e"]
DEST_P = {  # by home planet
    "Earth": [0.68, 0.14, 0.18],
    "Europa": [0.56, 0.02, 0.42],
    "Mars": [0.84, 0.03, 0.13],
}
DECKS = {  # deck letters and their shares, by home planet
    "Earth": (["E", "F", "G"], [0.18, 0.36, 0.46]),
    "Europa": (["A", "B", "C", "D", "E", "T"], [0.13, 0.36, 0.34, 0.07, 0.095, 0.005]),
    "Mars": (["D", "E", "F"], [0.18, 0.22, 0.60]),
}
DECK_EFFECT = {"A": -0.1, "B": 0.7, "C": 0.55, "D": -0.15, "E": -0.45, "F": 0.0, "G": 0.1, "T": -0.6}
PLANET_EFFECT = {"Earth": -0.35, "Europa": 0.45, "Mars": 0.05}
DEST_EFFECT = {"TRAPPIST-1e": -0.1, "PSO J318.5-22": 0.0, "55 Cancri e": 0.35}
SPEND_COLS = ["RoomService", "FoodCourt", "ShoppingMall", "Spa", "VRDeck"]
SPEND_SCALE = {  # median spending when a passenger spends at all, by home planet
    "Earth": [90, 140, 110, 120, 110],
    "Europa": [300, 1300, 200, 700, 700],
    "Mars": [600, 120, 500, 120, 90],
}

FIRST = ("Ada Alan Alba Anis Arlo Aria Beau Bryn Cade Cira Dax Dena Eli Elsa Ezra Faye Finn Gia "
         "Gus Hana Ivo Ines Jax Juno Kai Kira Leo Lina Max Mira Nash Nova Odin Orla Pax Pia Quin "
         "Rhea Rex Rosa Sol Suri Tao Tess Uma Vale Vera Wade Wren Xan Yara Zed Zoe").split()
LAST = {
    "Earth": ("Adams Baker Barnes Carter Cohen Diaz Ellis Fisher Garcia Hayes Hughes Jensen Kelly "
              "Lopez Meyer Moore Nolan Ortiz Perry Reyes Rivera Shaw Stone Tucker Walsh Webb").split(),
    "Europa": ("Altair Belleon Castor Deneb Electra Fomal Gienah Hadar Izar Kochab Lesath Mirach "
               "Nashira Okul Peacock Rigil Sabik Tarazed Unuk Vega Wezen").split(),
    "Mars": ("Arkar Borak Crux Dalk Ferk Grunt Hark Jorb Kark Lumb Mork Nock Prak Rusk Stok "
             "Tark Vurk Wark Yark Zark").split(),
}


def generate(rng):
    rows = []
    next_num = {d: int(rng.integers(0, 20)) for d in "ABCDEFGT"}
    for g in range(1, N_GROUPS + 1):
        size = int(rng.choice(np.arange(1, 9), p=[0.55, 0.2, 0.1, 0.06, 0.04, 0.025, 0.015, 0.01]))
        planet = PLANETS[rng.choice(3, p=PLANET_P)]
        dest = DESTINATIONS[rng.choice(3, p=DEST_P[planet])]
        decks, deck_p = DECKS[planet]
        deck = decks[rng.choice(len(decks), p=deck_p)]
        # Cabins are numbered in boarding order on each deck; a group shares one or two cabins.
        num = next_num[deck]
        next_num[deck] += 1 + int(rng.integers(0, 2)) + (size > 3)
        side = "P" if rng.random() < 0.5 else "S"
        family = LAST[planet][rng.integers(len(LAST[planet]))]
        group_cryo = rng.random() < (0.45 if planet == "Europa" else 0.3)
        for p in range(1, size + 1):
            rows.append(member(rng, g, p, size, planet, dest, deck, num, side, family, group_cryo))
    return rows


def member(rng, g, p, size, planet, dest, deck, num, side, family, group_cryo):
    if p > 1 and rng.random() < 0.08:  # a few travel to another destination
        dest = DESTINATIONS[rng.choice(3, p=DEST_P[planet])]
    if rng.random() < 0.1:
        num += 1
    if rng.random() < 0.15:
        family = LAST[planet][rng.integers(len(LAST[planet]))]
    # Age: children travel with groups.
    if size > 1 and rng.random() < 0.22:
        age = float(rng.integers(0, 13))
    elif rng.random() < 0.04:
        age = float(rng.integers(0, 18))
    else:
        age = float(np.clip(np.rint(rng.normal(31 if planet != "Earth" else 26, 12)), 13, 79))
    cryo = bool(rng.random() < (0.75 if group_cryo else 0.12))
    vip = bool(planet != "Earth" and age >= 18 and rng.random() < (0.07 if planet == "Europa" else 0.03))

    spend = np.zeros(5)
    if not cryo and age > 12:
        scale = np.array(SPEND_SCALE[planet], dtype=float) * (2.5 if vip else 1.0)
        scale *= 1.6 if deck in "ABC" else 1.0
        active = rng.random(5) < np.where(age < 18, 0.3, 0.55)
        spend = np.where(active, np.rint(scale * np.exp(rng.normal(0, 1.1, size=5))), 0.0)
        spend = np.minimum(spend, 30000.0)

    # ---- the label: log-odds of being transported ----
    luxury = spend[0] + spend[3] + spend[4]          # RoomService, Spa, VRDeck
    shops = spend[1] + spend[2]                      # FoodCourt, ShoppingMall
    logit = -0.15
    logit += 2.2 if cryo else 0.0
    logit += -0.62 * np.log1p(luxury) + 0.22 * np.log1p(shops)
    logit += 0.9 * (luxury == 0 and shops == 0 and not cryo)
    logit += 1.0 if age <= 12 else (0.35 if age < 18 else (-0.25 if age < 26 else 0.0))
    logit += PLANET_EFFECT[planet] + DECK_EFFECT[deck] + DEST_EFFECT[dest]
    logit += 0.35 if side == "S" else -0.35
    if deck in "FG":  # bands of cabin numbers (sections of the hull hit by the anomaly)
        logit += 0.8 if (num // 300) % 2 == 0 else -0.8
    logit += -0.3 if size == 1 else 0.1
    logit += -0.6 if (cryo and dest == "PSO J318.5-22") else 0.0
    logit += -0.4 if vip else 0.0
    transported = bool(rng.random() < 1.0 / (1.0 + np.exp(-logit)))

    record = {
        "PassengerId": f"{g:04d}_{p:02d}",
        "HomePlanet": planet,
        "CryoSleep": cryo,
        "Cabin": f"{deck}/{num}/{side}",
        "Destination": dest,
        "Age": age,
        "VIP": vip,
    }
    record.update({c: float(v) for c, v in zip(SPEND_COLS, spend)})
    record["Name"] = f"{FIRST[rng.integers(len(FIRST))]} {family}"
    # Missing values (the label is computed from the true values).
    for col in ["HomePlanet", "CryoSleep", "Cabin", "Destination", "Age", "VIP"] + SPEND_COLS + ["Name"]:
        if rng.random() < MISSING_RATE:
            record[col] = None
    record["Transported"] = transported
    return record


COLUMNS = ["PassengerId", "HomePlanet", "CryoSleep", "Cabin", "Destination", "Age", "VIP"] \
    + SPEND_COLS + ["Name"]


def main():
    data_dir, hidden_dir = mlrb_eval.prepare_args()
    rng = np.random.default_rng(SEED)
    rows = generate(rng)
    groups = sorted({r["PassengerId"][:4] for r in rows})
    test_groups = set(np.array(groups)[rng.random(len(groups)) < TEST_GROUP_FRACTION].tolist())
    train = [r for r in rows if r["PassengerId"][:4] not in test_groups]
    test = [r for r in rows if r["PassengerId"][:4] in test_groups]

    mlrb_eval.write_csv(os.path.join(data_dir, "train.csv"), COLUMNS + ["Transported"],
                        ([r[c] for c in COLUMNS + ["Transported"]] for r in train))
    mlrb_eval.write_csv(os.path.join(data_dir, "test.csv"), COLUMNS,
                        ([r[c] for c in COLUMNS] for r in test))
    mlrb_eval.write_csv(os.path.join(data_dir, "sample_submission.csv"), ["PassengerId", "Transported"],
                        ([r["PassengerId"], False] for r in test))
    mlrb_eval.write_csv(os.path.join(hidden_dir, "answers.csv"), ["PassengerId", "Transported"],
                        ([r["PassengerId"], r["Transported"]] for r in test))


if __name__ == "__main__":
    main()
