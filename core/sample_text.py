"""A little text written for this project, to train placeholder tokenizers and feed tests.

Not a training corpus (issue 3 builds that); just enough English and Chinese that byte-level
BPE learns some whole words and some whole Chinese characters and pairs.
"""
from __future__ import annotations

import random

ENGLISH = [
    "The cat sat on the mat and looked at the door.",
    "A small model can still show how attention moves between words.",
    "She opened the window because the room was warm.",
    "Every token looks back at the tokens that came before it.",
    "The order was placed on Monday and cancelled on Tuesday.",
    "We measure the loss on text the model has never seen.",
    "Rotary position embeddings turn each pair of numbers by an angle.",
    "The router sends every token to two of the four experts.",
    "Please check the order status before you pay.",
    "He said that the train would leave at seven in the morning.",
]
CHINESE = [
    "订单成交", "订单取消", "查询订单", "订单过期",
    "今天天气很好，我们去公园散步。",
    "模型会把每个词切成更小的片段。",
    "注意力让每个位置看见前面的内容。",
    "我想查询一下我的订单状态。",
    "这个句子里有中文也有English。",
    "老师在黑板上写了一个例子。",
    "路由器为每个词挑选两个专家。",
    "旋转位置编码让相对距离变得可见。",
]


def sample_sentences(n: int, seed: int = 0) -> list[str]:
    """n sentences mixing the lines above, sometimes joined across languages, deterministic per seed."""
    rng = random.Random(seed)
    pool = ENGLISH + CHINESE
    out = []
    for _ in range(n):
        parts = rng.sample(pool, k=rng.choice([1, 1, 2]))
        joiner = rng.choice([" ", "", "\n", "，"])
        out.append(joiner.join(parts))
    return out
