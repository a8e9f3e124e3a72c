"""The models' training commands, apart from the benchmarks: the learned ranker
(``python -m training.train_ranker dump|train|cv|loso``, leave-one-source-out in
``training/ranker_loso.py``) and the learned slot extractor's weights
(``python -m training.train_slots --embedder NAME``). They write into
``memlane/recall/models/`` and ``memlane/facts/weights/``; the engine only reads those files."""
