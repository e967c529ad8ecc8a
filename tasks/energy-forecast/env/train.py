"""Starter script for the energy-forecast task: forecast hourly electricity demand.

Reads data/train.csv (hourly demand until 2022-11-30) and data/test.csv (the
next three months: timestamp, temperature and holiday flag, no demand) and
writes submission.csv with one demand forecast (MW) per test id. See
data_description.txt for the columns.
"""
import numpy as np
import pandas as pd

train = pd.read_csv("data/train.csv", parse_dates=["timestamp"])
test = pd.read_csv("data/test.csv", parse_dates=["timestamp"])


def seasonal_naive(history, future, weeks=4):
    """Forecast every future hour with the mean demand of the same weekday and
    hour over the last `weeks` weeks of the history."""
    start = history["timestamp"].max() - pd.Timedelta(weeks=weeks)
    recent = history[history["timestamp"] > start]
    profile = recent.groupby([recent["timestamp"].dt.weekday, recent["timestamp"].dt.hour])["demand"].mean()
    keys = list(zip(future["timestamp"].dt.weekday, future["timestamp"].dt.hour))
    return profile.reindex(keys).to_numpy()


# Local check: forecast the last three months of the training data from what came before.
cutoff = train["timestamp"].max() - pd.Timedelta(days=90)
past, recent = train[train["timestamp"] <= cutoff], train[train["timestamp"] > cutoff]
val_mae = np.mean(np.abs(seasonal_naive(past, recent) - recent["demand"].to_numpy()))
print(f"validation MAE (last 90 days of train): {val_mae:.1f} MW")

submission = pd.DataFrame({"id": test["id"], "demand": seasonal_naive(train, test)})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
