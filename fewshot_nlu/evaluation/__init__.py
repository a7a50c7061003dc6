"""Similarity-based evaluation of any sentence encoder (no fine-tuning): DSE §4.2's suite of prototype intent
classification, prototype out-of-scope detection and response selection, usable on every method's encoder."""
