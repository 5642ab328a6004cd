"""Named BERT sizes: (num_layers, hidden_dim, num_heads); intermediate_dim = 4 * hidden_dim.

Tiny to medium are the compact models of Turc et al. (2019); base and large are the
BERT paper's (Devlin et al., 2018: BASE 110M and LARGE 340M parameters).
"""

BERT_SIZES = {
    "tiny": dict(num_layers=2, hidden_dim=128, num_heads=2),
    "mini": dict(num_layers=4, hidden_dim=256, num_heads=4),
    "small": dict(num_layers=4, hidden_dim=512, num_heads=8),
    "medium": dict(num_layers=8, hidden_dim=512, num_heads=8),
    "base": dict(num_layers=12, hidden_dim=768, num_heads=12),
    "large": dict(num_layers=24, hidden_dim=1024, num_heads=16),
}
