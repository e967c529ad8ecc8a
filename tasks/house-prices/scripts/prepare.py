"""Prepare the data of the mlrb `house-prices` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Generates a synthetic housing data set, loosely modelled on the Ames (Iowa)
house sales, with numpy from a fixed seed: numeric and categorical features,
a few missing values, and a sale price that depends nonlinearly on the
features, with interactions and multiplicative noise.

Writes
  <public_dir>/data/train.csv              Id,<features>,SalePrice (2000 rows)
  <public_dir>/data/test.csv               Id,<features>            (600 rows)
  <public_dir>/data/sample_submission.csv  Id,SalePrice
  <hidden_dir>/answers.csv                 Id,SalePrice
The output is byte-identical on every run.
"""
import os
import sys

import numpy as np

SEED = 1460
N_TRAIN, N_TEST = 2000, 600

# name, share of sales, price multiplier (log), typical year built, quality shift
NEIGHBORHOODS = [
    ("NAmes", 0.16, 0.00, 1962, 0.0),
    ("CollgCr", 0.11, 0.10, 1997, 0.6),
    ("OldTown", 0.08, -0.12, 1920, -0.7),
    ("Edwards", 0.07, -0.10, 1955, -0.6),
    ("Somerst", 0.06, 0.14, 2003, 1.0),
    ("Gilbert", 0.06, 0.06, 1999, 0.4),
    ("NridgHt", 0.05, 0.32, 2004, 2.0),
    ("NWAmes", 0.05, 0.05, 1975, 0.2),
    ("Sawyer", 0.05, -0.04, 1962, -0.3),
    ("BrkSide", 0.05, -0.15, 1928, -0.8),
    ("Crawfor", 0.04, 0.12, 1935, 0.3),
    ("Mitchel", 0.04, -0.01, 1975, -0.1),
    ("IDOTRR", 0.03, -0.30, 1925, -1.2),
    ("NoRidge", 0.03, 0.30, 1994, 1.8),
    ("Timber", 0.03, 0.20, 1995, 1.0),
    ("StoneBr", 0.02, 0.35, 1998, 2.2),
    ("MeadowV", 0.02, -0.35, 1972, -1.3),
    ("ClearCr", 0.02, 0.12, 1965, 0.4),
    ("SWISU", 0.02, -0.08, 1925, -0.4),
    ("Veenker", 0.01, 0.18, 1978, 0.9),
]
KITCHEN_LEVELS = ["Fa", "TA", "Gd", "Ex"]
KITCHEN_EFFECT = np.array([-0.08, 0.0, 0.06, 0.15])

COLUMNS = [
    "Id", "Neighborhood", "LotFrontage", "LotArea", "OverallQual", "OverallCond",
    "YearBuilt", "YearRemodAdd", "TotalBsmtSF", "GrLivArea", "FullBath", "HalfBath",
    "BedroomAbvGr", "KitchenQual", "Fireplaces", "GarageCars", "CentralAir",
    "MoSold", "YrSold",
]


def generate(rng, n):
    shares = np.array([nb[1] for nb in NEIGHBORHOODS])
    nb = rng.choice(len(NEIGHBORHOODS), size=n, p=shares / shares.sum())
    nb_price = np.array([x[2] for x in NEIGHBORHOODS])[nb]
    nb_year = np.array([x[3] for x in NEIGHBORHOODS])[nb]
    nb_qual = np.array([x[4] for x in NEIGHBORHOODS])[nb]

    yr_sold = rng.integers(2006, 2011, size=n)
    mo_sold = np.clip(np.rint(rng.normal(6.3, 2.6, size=n)), 1, 12).astype(int)
    year_built = np.rint(nb_year + rng.normal(0, 12, size=n)).astype(int)
    year_built = np.minimum(np.clip(year_built, 1872, 2010), yr_sold)
    age = yr_sold - year_built

    # Quality: neighbourhood, newer houses better, noise.
    qual_raw = 5.6 + 0.7 * nb_qual + 0.015 * (year_built - 1970) + rng.normal(0, 1.0, size=n)
    overall_qual = np.clip(np.rint(qual_raw), 1, 10).astype(int)
    cond_raw = 5.5 + rng.normal(0, 0.9 + 0.008 * np.minimum(age, 100), size=n)
    overall_cond = np.clip(np.rint(cond_raw), 1, 9).astype(int)

    # Remodelling: likelier for old houses, never before construction.
    remodeled = rng.random(size=n) < np.clip(age / 60.0, 0.05, 0.85)
    remod_year = year_built + (rng.random(size=n) * np.maximum(yr_sold - year_built, 0)).astype(int)
    year_remod = np.where(remodeled, np.maximum(remod_year, 1950), year_built)
    year_remod = np.minimum(np.maximum(year_remod, year_built), yr_sold)

    # Size: living area grows with quality; lot area with living area (heavy tail).
    gr_liv_area = np.exp(np.log(1500) + 0.09 * (overall_qual - 6) + rng.normal(0, 0.25, size=n))
    gr_liv_area = np.clip(np.rint(gr_liv_area), 400, 5200).astype(int)
    lot_area = np.exp(np.log(9500) + 0.45 * np.log(gr_liv_area / 1500)
                      - 0.004 * (year_built - 1970) * (nb_price > 0.2)
                      + rng.standard_t(4, size=n) * 0.30)
    lot_area = np.clip(np.rint(lot_area), 1300, 150000).astype(int)
    lot_frontage = np.rint(np.sqrt(lot_area) * rng.uniform(0.55, 0.9, size=n)).astype(float)

    has_bsmt = rng.random(size=n) > 0.03
    total_bsmt = np.rint(gr_liv_area * rng.uniform(0.45, 1.1, size=n)
                         * (1 + 0.04 * (overall_qual - 6))) * has_bsmt
    total_bsmt = np.clip(total_bsmt, 0, 4000).astype(float)

    bedrooms = np.clip(np.rint(gr_liv_area / 550 + rng.normal(0.3, 0.7, size=n)), 0, 7).astype(int)
    full_bath = np.clip(np.rint(gr_liv_area / 1000 + 0.15 * (overall_qual - 6)
                                + rng.normal(0, 0.45, size=n)), 0, 4).astype(int)
    half_bath = (rng.random(size=n) < np.clip(0.15 + 0.25 * (gr_liv_area > 1700)
                                              + 0.04 * (overall_qual - 6), 0, 1)).astype(int)
    half_bath += (rng.random(size=n) < 0.03).astype(int)

    kitchen_raw = 1.45 + 0.45 * (overall_qual - 6) + rng.normal(0, 0.5, size=n)
    kitchen = np.clip(np.rint(kitchen_raw), 0, 3).astype(int)
    fireplaces = np.clip(np.rint(rng.normal(0.2 + 0.15 * (overall_qual - 5), 0.6, size=n)),
                         0, 3).astype(int)
    garage_raw = 1.4 + 0.25 * (overall_qual - 6) + 0.015 * (year_built - 1960) \
        + rng.normal(0, 0.6, size=n)
    garage_cars = np.clip(np.rint(garage_raw), 0, 4).astype(float)
    central_air = np.where(rng.random(size=n) < np.clip(0.98 - 0.006 * np.maximum(age - 50, 0), 0.4, 1),
                           "Y", "N")

    # ---- the sale price (log scale) ----
    q = overall_qual.astype(float)
    log_area = np.log(gr_liv_area / 1500)
    logp = (
        np.log(160000)
        + 0.7 * nb_price
        + 0.06 * (q - 6) + 0.01 * np.maximum(q - 6, 0) ** 2       # convex in quality
        + (0.55 + 0.05 * (q - 6)) * log_area                      # area x quality interaction
        - 0.25 * np.maximum(log_area - 0.9, 0)                    # huge houses: diminishing returns
        + 0.08 * np.log(lot_area / 9500) / (1 + np.abs(np.log(lot_area / 9500)))  # saturating
        - 0.0035 * np.minimum(age, 60) + 0.0015 * np.maximum(age - 80, 0)          # age, historic premium
        + 0.05 * ((year_remod > year_built) & (yr_sold - year_remod < 15))
        + 0.03 * (overall_cond - 5) * (1 + 0.01 * np.minimum(age, 50))             # condition matters more when old
        + 0.09 * total_bsmt / 1000 - 0.06 * (total_bsmt == 0)
        + 0.045 * garage_cars - 0.06 * (garage_cars == 0)
        + 0.02 * full_bath + 0.015 * half_bath - 0.015 * np.maximum(bedrooms - 4, 0)
        + KITCHEN_EFFECT[kitchen]
        + 0.035 * np.minimum(fireplaces, 2)
        - 0.10 * (central_air == "N")
        - 0.04 * (yr_sold >= 2009) * (1 + (nb_price < 0))          # the crash, harder on cheap areas
        + 0.01 * np.sin(2 * np.pi * (mo_sold - 3) / 12)
    )
    logp += rng.normal(0, 0.085, size=n)
    # A few unusual sales (partial sales, foreclosures).
    logp += np.where(rng.random(size=n) < 0.015, rng.normal(-0.25, 0.15, size=n), 0.0)
    price = np.rint(np.exp(logp) / 100) * 100

    # Missing values, as in the real data.
    lot_frontage[rng.random(size=n) < 0.16] = np.nan
    garage_cars[rng.random(size=n) < 0.01] = np.nan
    total_bsmt[rng.random(size=n) < 0.008] = np.nan
    kitchen_str = np.array(KITCHEN_LEVELS, dtype=object)[kitchen]
    kitchen_str[rng.random(size=n) < 0.005] = ""

    features = {
        "Neighborhood": np.array([x[0] for x in NEIGHBORHOODS], dtype=object)[nb],
        "LotFrontage": lot_frontage,
        "LotArea": lot_area,
        "OverallQual": overall_qual,
        "OverallCond": overall_cond,
        "YearBuilt": year_built,
        "YearRemodAdd": year_remod,
        "TotalBsmtSF": total_bsmt,
        "GrLivArea": gr_liv_area,
        "FullBath": full_bath,
        "HalfBath": half_bath,
        "BedroomAbvGr": bedrooms,
        "KitchenQual": kitchen_str,
        "Fireplaces": fireplaces,
        "GarageCars": garage_cars,
        "CentralAir": central_air,
        "MoSold": mo_sold,
        "YrSold": yr_sold,
    }
    return features, price


def fmt(v):
    """Deterministic text for one cell: integers without decimals, NaN/"" as empty."""
    if isinstance(v, str):
        return v
    if isinstance(v, (float, np.floating)):
        if np.isnan(v):
            return ""
        return str(int(v)) if float(v).is_integer() else repr(float(v))
    return str(int(v))


def write_csv(path, columns, table, n):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(",".join(columns) + "\n")
        for i in range(n):
            f.write(",".join(fmt(table[c][i]) for c in columns) + "\n")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: prepare.py <public_dir> <hidden_dir>")
    public_dir, hidden_dir = sys.argv[1], sys.argv[2]
    data_dir = os.path.join(public_dir, "data")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(hidden_dir, exist_ok=True)

    rng = np.random.default_rng(SEED)
    n = N_TRAIN + N_TEST
    features, price = generate(rng, n)
    table = dict(features)
    table["Id"] = np.arange(1, n + 1)
    table["SalePrice"] = price

    train = {k: v[:N_TRAIN] for k, v in table.items()}
    test = {k: v[N_TRAIN:] for k, v in table.items()}
    write_csv(os.path.join(data_dir, "train.csv"), COLUMNS + ["SalePrice"], train, N_TRAIN)
    write_csv(os.path.join(data_dir, "test.csv"), COLUMNS, test, N_TEST)
    median = {"Id": test["Id"], "SalePrice": np.full(N_TEST, float(np.median(train["SalePrice"])))}
    write_csv(os.path.join(data_dir, "sample_submission.csv"), ["Id", "SalePrice"], median, N_TEST)
    write_csv(os.path.join(hidden_dir, "answers.csv"), ["Id", "SalePrice"], test, N_TEST)


if __name__ == "__main__":
    main()
