"""Prepare the data of the mlrb `text-intents` task.

Usage: python3 prepare.py <public_dir> <hidden_dir>

Generates, with numpy from a fixed seed, short English messages that
customers send to a bank's support chat, each labelled with one of eight
intents. Messages are built from per-intent templates filled with synonyms,
merchants, amounts and people, wrapped in greetings, closings and
distractor sentences that use other intents' words, sometimes opened by a
negated phrase of another intent ("my card isn't lost, but ..."), and
disturbed by typos, random casing and punctuation. About 2 % of the labels
are flipped to a random intent (annotation noise). Every fourth phrasing of
each intent occurs only in the test messages, so that a model must
generalise beyond the training phrasings.

Writes
  <public_dir>/data/train.csv              id,text,intent
  <public_dir>/data/test.csv               id,text
  <public_dir>/data/sample_submission.csv  id,intent (all check_balance)
  <hidden_dir>/answers.csv                 id,intent
The output is byte-identical on every run.
"""
import os
import re

import numpy as np

import mlrb_eval

SEED = 77031
N_TRAIN, N_TEST = 3000, 2000
LABEL_NOISE = 0.02
TYPO_RATE = 0.12

SLOTS = {
    "card": ["card", "card", "debit card", "credit card", "bank card", "visa card", "mastercard", "contactless card"],
    "payment": ["payment", "charge", "transaction", "purchase", "debit", "payment"],
    "merchant": ["amazon", "tesco", "uber", "netflix", "spotify", "a petrol station", "a restaurant",
                 "an online shop", "ebay", "a hotel", "the supermarket", "a coffee shop", "the pharmacy",
                 "a clothes shop", "the train station", "paypal", "apple", "a taxi company"],
    "day": ["yesterday", "today", "last week", "on monday", "this morning", "two days ago", "last night",
            "on friday", "earlier today", "at the weekend"],
    "account": ["account", "current account", "savings account", "bank account", "account", "joint account"],
    "person": ["my friend", "my mum", "my landlord", "my brother", "a colleague", "my sister", "my dad",
               "the builder", "my son", "my flatmate", "a friend abroad"],
    "lost": ["lost", "misplaced", "dropped", "lost", "can't find"],
    "lostadj": ["lost", "stolen", "missing"],
    "block": ["block", "freeze", "cancel", "stop", "deactivate"],
    "declined": ["declined", "rejected", "refused", "not accepted", "declined"],
    "machine": ["atm", "cash machine", "till", "card reader", "terminal", "self checkout"],
    "send": ["send", "transfer", "move", "pay", "send"],
    "detail": ["address", "phone number", "email", "email address", "mobile number", "surname", "home address"],
    "country": ["spain", "france", "japan", "the us", "italy", "germany", "canada", "portugal"],
    "help": ["can you help", "what should i do", "please help", "what can i do", "help me please",
             "can you sort this out", "what are my options"],
    "years": ["two", "five", "ten", "many", "three"],
}

CORES = {
    "lost_card": [
        "i {lost} my {card}",
        "my {card} was stolen {day}",
        "someone stole my {card}",
        "my wallet with my {card} in it was stolen {day}",
        "i think i left my {card} at {merchant}",
        "please {block} my {card} i {lost} it",
        "my {card} is missing",
        "i can't find my {card} anywhere",
        "how do i report a {lostadj} {card}",
        "i need a replacement {card} because mine was {lostadj}",
        "i {lost} my purse and my {card} was in it",
        "{block} my {card} right now it is {lostadj}",
        "i can't use my {card} because i {lost} it",
        "i don't have my {card} any more someone took it",
        "cancel my {card} because it was {lostadj}",
    ],
    "card_declined": [
        "my {card} was {declined} at {merchant}",
        "why does my {card} keep getting {declined}",
        "my {payment} was {declined} at {merchant} {day}",
        "my {card} is not working at the {machine}",
        "i tried to pay {merchant} but the {payment} failed",
        "the {machine} would not accept my {card}",
        "i can't pay with my {card}",
        "my {card} stopped working {day}",
        "every {payment} i try gets {declined}",
        "the {machine} says my {card} is invalid",
        "my new {card} does not work",
        "i tried to use my {card} at {merchant} but it didn't work",
        "i couldn't pay {merchant} {amount} with my {card}",
        "my {card} doesn't work for {payment}s online",
    ],
    "unrecognised_charge": [
        "there is a {payment} on my {account} i don't recognise",
        "i see a {payment} from {merchant} that i never made",
        "i did not make this {payment} of {amount}",
        "someone used my {card} to pay {merchant}",
        "unknown {payment} of {amount} on my statement",
        "i have been charged {amount} by {merchant} but i never bought anything",
        "there is a {payment} i didn't authorise",
        "i think my {card} details were used without permission",
        "who is {merchant} and why did they take {amount}",
        "a strange {payment} to {merchant} appeared {day}",
        "this {payment} is not mine",
        "i didn't make this {payment} to {merchant} and i want my money back",
        "i never paid {merchant} {amount} so why was i charged",
        "my {card} was used at {merchant} but not by me",
    ],
    "refund_request": [
        "i returned my order to {merchant} and want a refund",
        "{merchant} promised a refund of {amount} but i have not received it",
        "how do i get my money back for a {payment} to {merchant}",
        "i was charged twice by {merchant} and want the money back",
        "i cancelled my order with {merchant} please refund me",
        "where is my refund from {merchant}",
        "the item never arrived and i want my money back",
        "can i get a refund for the {payment} of {amount}",
        "{merchant} said the refund was sent {day}",
        "i want to dispute the {payment} to {merchant} the goods were faulty",
        "i made a {payment} to {merchant} and i want my money back",
        "i paid {merchant} {amount} but they never sent the item",
        "i used my {card} at {merchant} and they owe me a refund",
    ],
    "transfer_money": [
        "i want to {send} {amount} to {person}",
        "how do i transfer money from my {account} to my savings",
        "can i make a {payment} to {person}",
        "i need to pay {person} {amount} {day}",
        "set up a transfer of {amount} to {person}",
        "my transfer to {person} did not arrive",
        "how long does a bank transfer take",
        "i want to {send} money abroad to {person}",
        "how do i add {person} as a new payee",
        "set up a standing order to {person}",
        "{send} {amount} from my {account} to {person} please",
        "i want to move money from my {account} to {person}",
        "can i pay {person} {amount} from my {account}",
        "i need to {send} {amount} to {person} {day}",
    ],
    "check_balance": [
        "how much money is in my {account}",
        "what is my {account} balance",
        "can you tell me my balance",
        "i want to check my balance before i pay {merchant}",
        "do i have enough money to pay {amount}",
        "show me the available funds in my {account}",
        "how much is left on my {card}",
        "what is the balance of my {account}",
        "is my {account} overdrawn",
        "how much can i spend this month",
        "do i have {amount} in my {account} to pay {person}",
        "is there enough money in my {account} to {send} {amount} to {person}",
        "how much money do i have left on my {card}",
    ],
    "update_details": [
        "i moved house and need to change my address",
        "please update my {detail}",
        "how do i change the {detail} on my {account}",
        "my {detail} has changed",
        "i got married and want to change my surname",
        "send my new {card} to my new address",
        "i have a new {detail} can you update it",
        "your records have my old {detail}",
        "where do i edit my {detail} in the app",
        "change the {detail} for my {account}",
        "i moved and my {card} letters still go to my old address",
        "i want to change the details on my {account}",
        "the {detail} on my {card} is wrong",
    ],
    "close_account": [
        "i want to close my {account}",
        "please cancel my {account} and send me the remaining balance",
        "how do i close my {account}",
        "i am leaving the bank please close everything",
        "i no longer need my {account}",
        "shut down my {account} and my {card}",
        "terminate my {account} {day}",
        "i want to move to another bank and close my {account}",
        "how do i end my membership with you",
        "close my {account} and transfer the money to my new bank",
        "i don't need my {account} any more please close it",
        "cancel my {card} and my {account} for good",
        "i want to move all my money out and close the {account}",
    ],
}
INTENTS = sorted(CORES)

# Negated phrases of an intent, put before another intent's message.
NEGATED = {
    "lost_card": ["my {card} isn't lost", "i haven't lost my {card}", "my {card} is not stolen"],
    "card_declined": ["my {card} works fine", "my {card} was not declined"],
    "unrecognised_charge": ["i did make the {payment}", "the {payment} is mine", "i recognise the {payment}"],
    "refund_request": ["i don't want a refund", "this is not about a refund"],
    "transfer_money": ["i don't want to send money", "this is not about a transfer"],
    "check_balance": ["i know my balance", "i'm not asking about my balance"],
    "update_details": ["i don't want to change my {detail}", "my {detail} is still the same"],
    "close_account": ["i don't want to close my {account}", "i'm not leaving the bank"],
}
CONNECTORS = [" but ", ", but ", ". ", ", just ", " - "]

GREETINGS = ["", "", "", "hi ", "hello ", "hey there ", "good morning ", "hi team ", "dear bank "]
CLOSINGS = ["", "", "", " thanks", " thank you", " {help}", " asap", " cheers", " please", " thx"]
CONTEXTS = [
    "i'm in {country} at the moment",
    "i've been a customer for {years} years",
    "i already checked the app",
    "sorry to bother you",
    "this is the second time i am writing",
    "i paid {merchant} {day} without problems",
    "i checked my balance this morning",
    "i just moved to a new flat",
    "my {card} arrived last week",
    "i made a transfer to {person} {day}",
    "i got a refund from {merchant} last month",
    "the app keeps crashing",
    "my {card} was declined once last year",
    "i updated my {detail} recently",
    "i nearly closed my {account} last year",
    "i lost my phone {day}",
    "my {payment} to {merchant} went through fine",
    "i have money in my {account}",
]

KEYBOARD = {
    "a": "qsz", "b": "vgn", "c": "xvd", "d": "sfe", "e": "wrd", "f": "dgr", "g": "fht", "h": "gjy",
    "i": "uok", "j": "hku", "k": "jli", "l": "kop", "m": "n", "n": "bm", "o": "ipl", "p": "ol",
    "q": "wa", "r": "etf", "s": "adw", "t": "ryg", "u": "yij", "v": "cb", "w": "qes", "x": "zc",
    "y": "tuh", "z": "xa",
}


def pick(rng, options):
    return options[int(rng.integers(len(options)))]


def amount(rng):
    value = int(rng.choice([5, 9, 12, 15, 20, 25, 40, 49, 60, 75, 100, 120, 150, 200, 250, 500, 1000]))
    if rng.random() < 0.3:
        return f"{value}.{int(rng.integers(0, 100)):02d}"
    return pick(rng, [f"£{value}", f"${value}", f"{value} pounds", f"{value} euros", f"€{value}", str(value)])


def fill(rng, template):
    def slot(match):
        name = match.group(1)
        if name == "amount":
            return amount(rng)
        return fill(rng, pick(rng, SLOTS[name]))
    return re.sub(r"\{(\w+)\}", slot, template)


def typo(rng, word):
    if len(word) < 4 or not word.isalpha():
        return word
    i = int(rng.integers(1, len(word) - 1))
    kind = int(rng.integers(4))
    if kind == 0:  # dropped letter
        return word[:i] + word[i + 1:]
    if kind == 1:  # swapped letters
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 2:  # doubled letter
        return word[:i] + word[i] + word[i:]
    near = KEYBOARD.get(word[i])  # neighbouring key
    return word[:i] + pick(rng, near) + word[i + 1:] if near else word


def message(rng, intent, split):
    # Every fourth phrasing of an intent occurs only in the test messages.
    templates = [t for k, t in enumerate(CORES[intent]) if split == "test" or k % 4 != 3]
    core = fill(rng, pick(rng, templates))
    if rng.random() < 0.3:
        other = pick(rng, [i for i in INTENTS if i != intent])
        core = fill(rng, pick(rng, NEGATED[other])) + pick(rng, CONNECTORS) + core
    parts = [core]
    if rng.random() < 0.5:
        context = fill(rng, pick(rng, CONTEXTS))
        parts.insert(0 if rng.random() < 0.6 else 1, context)
    text = ". ".join(parts) if rng.random() < 0.6 else " and ".join(parts)
    text = fill(rng, pick(rng, GREETINGS)) + text + fill(rng, pick(rng, CLOSINGS))
    words = [typo(rng, w) if rng.random() < TYPO_RATE else w for w in text.split(" ")]
    text = " ".join(words)
    style = rng.random()
    if style < 0.35:
        text = text[0].upper() + text[1:]
        text = re.sub(r"(^|\. )i( |')", lambda m: m.group(1) + "I" + m.group(2), text)
        text = re.sub(r" i( |')", r" I\1", text)
    elif style < 0.42:
        text = text.upper()
    ending = rng.random()
    if ending < 0.3:
        text += "."
    elif ending < 0.4:
        text += "?"
    elif ending < 0.47:
        text += "!!"
    return text


def main():
    data_dir, hidden_dir = mlrb_eval.prepare_args()
    rng = np.random.default_rng(SEED)
    n = N_TRAIN + N_TEST
    # Unequal class shares, as in real support traffic.
    shares = np.array([1.0, 1.3, 0.8, 1.2, 1.1, 0.9, 1.4, 1.0])
    labels = rng.choice(len(INTENTS), size=n, p=shares / shares.sum())
    texts = [message(rng, INTENTS[k], "train" if j < N_TRAIN else "test") for j, k in enumerate(labels)]
    noisy = rng.random(n) < LABEL_NOISE
    labels = np.where(noisy, rng.integers(0, len(INTENTS), size=n), labels)
    intents = [INTENTS[k] for k in labels]
    ids = np.arange(1, n + 1)

    train, test = slice(0, N_TRAIN), slice(N_TRAIN, n)
    mlrb_eval.write_csv(os.path.join(data_dir, "train.csv"), ["id", "text", "intent"],
                        zip(ids[train], texts[train], intents[train]))
    mlrb_eval.write_csv(os.path.join(data_dir, "test.csv"), ["id", "text"],
                        zip(ids[test], texts[test]))
    mlrb_eval.write_csv(os.path.join(data_dir, "sample_submission.csv"), ["id", "intent"],
                        ((i, "check_balance") for i in ids[test]))
    mlrb_eval.write_csv(os.path.join(hidden_dir, "answers.csv"), ["id", "intent"],
                        zip(ids[test], intents[test]))


if __name__ == "__main__":
    main()
