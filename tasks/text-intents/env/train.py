"""Starter script for the text-intents task: classify customer messages by intent.

Reads data/train.csv (messages with their intent) and data/test.csv (messages
only), trains a text classifier and writes submission.csv with one predicted
intent per test id. See data_description.txt for the data and the intents.
"""
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import make_pipeline

SEED = 0

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

# Bag of words over the 100 most frequent words only, and naive Bayes.
def make_model():
    return make_pipeline(CountVectorizer(max_features=100), MultinomialNB())


# Hold out part of the training data to estimate the accuracy locally.
X_tr, X_val, y_tr, y_val = train_test_split(
    train["text"], train["intent"], test_size=0.2, stratify=train["intent"], random_state=SEED
)
model = make_model().fit(X_tr, y_tr)
print(f"validation accuracy: {accuracy_score(y_val, model.predict(X_val)):.4f}")

# Refit on all labelled messages and predict the test set.
model = make_model().fit(train["text"], train["intent"])
submission = pd.DataFrame({"id": test["id"], "intent": model.predict(test["text"])})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
