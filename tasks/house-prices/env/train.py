"""Starter script for the house-prices task: predict the sale price of houses.

Reads data/train.csv (with SalePrice) and data/test.csv (without), fits a
regression model and writes submission.csv with one predicted SalePrice per
test Id. See data_description.txt for the meaning of the columns.
"""
import pandas as pd
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import train_test_split

SEED = 0

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# Only a few numeric columns (without missing values) are used so far.
# There are many more features in the data, including categorical ones.
features = ["GrLivArea", "YearBuilt", "LotArea"]
X = train[features]
y = train["SalePrice"]

# Hold out part of the training data to estimate the error locally.
X_tr, X_val, y_tr, y_val = train_test_split(X, y, test_size=0.2, random_state=SEED)

# A plain linear regression on the raw features.
model = LinearRegression()
model.fit(X_tr, y_tr)
print(f"validation MAE: {mean_absolute_error(y_val, model.predict(X_val)):,.0f}")

# Refit on all training rows and predict the test set.
model.fit(X, y)
submission = pd.DataFrame({"Id": test["Id"], "SalePrice": model.predict(test[features])})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
