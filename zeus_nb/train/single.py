"""Single-GPU training with the power-limit optimizer.

python -m zeus_nb.train.single --data DATA_DIR [--gpu 0]
python -m zeus_nb.train.single --data synthetic --backend sim   # CPU, simulated GPU
"""

from zeus_nb.train.cli import main, trainer

MODE = "single"
train = trainer(MODE)

if __name__ == "__main__":
    raise SystemExit(main(MODE))
