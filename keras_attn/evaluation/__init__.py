"""Zero- and few-shot evaluation of causal language models (GPT-2, GPT-3): prompts built
from solved examples, candidates scored by log-likelihood, no gradient step."""

from keras_attn.evaluation.few_shot import evaluate_few_shot, few_shot_prompt
from keras_attn.evaluation.log_likelihood import completion_log_likelihoods

# The result types are in their modules: `few_shot.FewShotResult`,
# `log_likelihood.LogLikelihoods`.
__all__ = [
    "completion_log_likelihoods",
    "evaluate_few_shot",
    "few_shot_prompt",
]
