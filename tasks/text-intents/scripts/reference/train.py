"""Reference solution for the text-intents task: tf-idf word and character
n-grams with a logistic regression.

Same inputs and output as the starter train.py (data/train.csv, data/test.csv
-> submission.csv with columns id,intent).
"""
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline, make_union

SEED = 0

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")


def make_model():
    features = make_union(
        # Word unigrams and bigrams keep short phrases such as "didn't make" or "not lost".
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2),
        # Character n-grams within words are robust to the many typos.
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2),
    )
    return make_pipeline(features, LogisticRegression(C=3.0, max_iter=3000))


X_tr, X_val, y_tr, y_val = train_test_split(
    train["text"], train["intent"], test_size=0.2, stratify=train["intent"], random_state=SEED
)
model = make_model().fit(X_tr, y_tr)
print(f"validation accuracy: {accuracy_score(y_val, model.predict(X_val)):.4f}")

model = make_model().fit(train["text"], train["intent"])
submission = pd.DataFrame({"id": test["id"], "intent": model.predict(test["text"])})
submission.to_csv("submission.csv", index=False)
print(f"wrote submission.csv with {len(submission)} rows")
