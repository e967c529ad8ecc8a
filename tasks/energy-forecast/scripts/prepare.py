"""Prepare the data of the mlrb `energy-forecast` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Generates, with numpy from a fixed seed, the hourly electricity demand of a
region of a few million people in a temperate climate, 2020-01-01 to
2023-02-28, with the outdoor temperature and a public-holiday flag:

  * temperature: a yearly cycle, a daily cycle (wider in summer) and weather
    anomalies that persist for days;
  * demand: slow growth; daily profiles that differ between weekdays,
    Saturdays and Sundays / holidays; heating that follows the temperature
    of the last day or so (buildings are slow to cool) and cooling that
    follows the last few hours; evening lighting that starts at dusk, which
    moves through the year; a Christmas lull of industry; AR(1) noise.

The last three months (2022-12-01 to 2023-02-28, 2160 hours) are the test
period: their temperature and holiday flag are public, their demand hidden.

Writes
  <public_dir>/data/train.csv              id,timestamp,temperature,holiday,demand
  <public_dir>/data/test.csv               id,timestamp,temperature,holiday
  <public_dir>/data/sample_submission.csv  id,demand (the training mean)
  <hidden_dir>/answers.csv                 id,demand
The output is byte-identical on every run.
"""
import datetime as dt
import os

import numpy as np

import mlrb_eval

SEED = 5150
START = dt.datetime(2020, 1, 1)
END = dt.datetime(2023, 3, 1)          # exclusive
TEST_START = dt.datetime(2022, 12, 1)

HOLIDAYS = {  # (month, day) every year, plus movable feasts by year
    (1, 1), (5, 1), (10, 3), (12, 25), (12, 26),
}
MOVABLE = {
    2020: [(4, 10), (4, 13), (5, 21), (6, 1)],
    2021: [(4, 2), (4, 5), (5, 13), (5, 24)],
    2022: [(4, 15), (4, 18), (5, 26), (6, 6)],
    2023: [(4, 7), (4, 10), (5, 18), (5, 29)],
}

# Relative demand by hour of day (0-23).
WEEKDAY = np.array([0.74, 0.71, 0.69, 0.68, 0.69, 0.74, 0.84, 0.96, 1.03, 1.05, 1.05, 1.05,
                    1.04, 1.03, 1.02, 1.02, 1.04, 1.08, 1.10, 1.07, 1.01, 0.94, 0.86, 0.79])
SATURDAY = np.array([0.76, 0.72, 0.69, 0.67, 0.66, 0.67, 0.71, 0.77, 0.85, 0.92, 0.96, 0.97,
                     0.97, 0.95, 0.93, 0.92, 0.94, 0.99, 1.02, 1.00, 0.96, 0.91, 0.85, 0.80])
SUNDAY = np.array([0.76, 0.72, 0.69, 0.67, 0.65, 0.65, 0.67, 0.71, 0.77, 0.84, 0.89, 0.92,
                   0.92, 0.90, 0.88, 0.87, 0.89, 0.95, 0.99, 0.98, 0.94, 0.89, 0.83, 0.78])


def is_holiday(day):
    return (day.month, day.day) in HOLIDAYS or (day.month, day.day) in MOVABLE.get(day.year, [])


def ewm(x, halflife):
    """Exponentially weighted mean along time (hours), causal."""
    alpha = 1.0 - 0.5 ** (1.0 / halflife)
    out = np.empty_like(x)
    acc = x[0]
    for i, v in enumerate(x):
        acc += alpha * (v - acc)
        out[i] = acc
    return out


def generate(rng):
    n_days = (END - START).days
    n = 24 * n_days
    days = [START.date() + dt.timedelta(days=d) for d in range(n_days)]
    hour = np.tile(np.arange(24), n_days)
    day_index = np.repeat(np.arange(n_days), 24)
    doy = np.array([d.timetuple().tm_yday for d in days], dtype=float)[day_index]
    weekday = np.array([d.weekday() for d in days])[day_index]
    holiday = np.array([is_holiday(d) for d in days])[day_index]
    years = (day_index + hour / 24.0) / 365.25

    # ---- temperature (deg C) ----
    season = np.cos(2 * np.pi * (doy - 203) / 365.25)             # +1 late July, -1 late January
    anomaly_daily = np.zeros(n_days + 1)
    for d in range(1, n_days + 1):
        anomaly_daily[d] = 0.8 * anomaly_daily[d - 1] + rng.normal(0, 1.9)
    # Smooth day-to-day change of the anomaly (linear interpolation through the day).
    frac = hour / 24.0
    anomaly = (1 - frac) * anomaly_daily[day_index] + frac * anomaly_daily[day_index + 1]
    daily_range = 3.2 + 1.8 * (season + 1) / 2
    temperature = (10.5 + 9.5 * season + daily_range * np.cos(2 * np.pi * (hour - 15) / 24)
                   + anomaly + rng.normal(0, 0.4, size=n))
    temperature = np.round(temperature, 1)

    # ---- demand (MW) ----
    profile = np.where(weekday[:, None] < 5, WEEKDAY, np.where(weekday[:, None] == 5, SATURDAY, SUNDAY))
    profile = profile[np.arange(n), hour]
    profile = np.where(holiday, SUNDAY[hour] * 0.98, profile)
    level = 5200 * (1 + 0.018 * years)
    demand = level * profile

    slow_t = ewm(temperature, halflife=18.0)   # heating: buildings lose heat slowly
    fast_t = ewm(temperature, halflife=3.0)    # cooling: reacts within hours
    heat = 95.0 * np.maximum(15.5 - slow_t, 0) * (0.8 + 0.3 * (profile > 0.9))
    cool = 130.0 * np.maximum(fast_t - 21.0, 0) ** 1.3 * (0.6 + 0.5 * (hour >= 11) * (hour <= 20))
    demand += heat + cool

    # Lighting: from dusk until 23:00; dusk moves from about 16:30 to 21:30.
    dusk = 19.0 - 2.5 * np.cos(2 * np.pi * (doy - 10) / 365.25)
    demand += 320.0 * np.clip(hour + 1 - dusk, 0, 1) * (hour < 23)
    # Christmas lull: industry closes between Christmas and New Year.
    date_md = np.array([(d.month, d.day) for d in days])[day_index]
    lull = ((date_md[:, 0] == 12) & (date_md[:, 1] >= 24)) | ((date_md[:, 0] == 1) & (date_md[:, 1] <= 2))
    demand *= np.where(lull & (profile > 0.8), 0.91, 1.0)

    noise = np.zeros(n)
    eps = rng.normal(0, 45.0, size=n)
    for i in range(1, n):
        noise[i] = 0.9 * noise[i - 1] + eps[i]
    demand = demand * (1 + rng.normal(0, 0.008, size=n)) + noise
    demand = np.round(demand, 1)

    stamps = [(dt.datetime.combine(days[d], dt.time(h))).strftime("%Y-%m-%d %H:%M")
              for d, h in zip(day_index, hour)]
    return stamps, temperature, holiday.astype(int), demand


def main():
    data_dir, hidden_dir = mlrb_eval.prepare_args()
    rng = np.random.default_rng(SEED)
    stamps, temperature, holiday, demand = generate(rng)
    n = len(stamps)
    n_train = 24 * (TEST_START - START).days
    ids = np.arange(1, n + 1)
    tr, te = slice(0, n_train), slice(n_train, n)

    mlrb_eval.write_csv(os.path.join(data_dir, "train.csv"),
                        ["id", "timestamp", "temperature", "holiday", "demand"],
                        zip(ids[tr], stamps[tr], temperature[tr], holiday[tr], demand[tr]))
    mlrb_eval.write_csv(os.path.join(data_dir, "test.csv"),
                        ["id", "timestamp", "temperature", "holiday"],
                        zip(ids[te], stamps[te], temperature[te], holiday[te]))
    mean = round(float(demand[tr].mean()), 1)
    mlrb_eval.write_csv(os.path.join(data_dir, "sample_submission.csv"), ["id", "demand"],
                        ((i, mean) for i in ids[te]))
    mlrb_eval.write_csv(os.path.join(hidden_dir, "answers.csv"), ["id", "demand"],
                        zip(ids[te], demand[te]))


if __name__ == "__main__":
    main()
