"""encdec: the Transformer encoder-decoder of the course book, small enough to read in one sitting.

``data`` (tokens and the arithmetic set), ``attention`` (mask, attention, KV cache), ``model``
(blocks and the Transformer), ``generate`` (greedy decoding), ``train`` (presets and the
training loop), ``widgets`` (the book's interactive figures). Importing it has no side effects.
"""

__version__ = "0.1.0"
