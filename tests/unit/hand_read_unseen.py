"""Values read by eye off real logs of frameworks that gpuherd has no parser for.

Each log under tests/data/logs named here (cited in its README) is read by the generic reader
alone: no format of `parsers.registry` knows these frameworks. A reading names the line, the
metric as `parsers.text.metric_name` spells it (docs/parsers.md), its value as printed, and
the step or epoch where the line (or the block it stands in) says so.

`BLIND` are the logs held out while the reader's rules were written: their recall tells how
well the rules generalize; the others are the ones the rules were developed on.
"""

from __future__ import annotations

from tests.unit.test_parsers_hand_read import Log, Read

UNSEEN: dict[str, Log] = {
    # ---- developed on ----
    "opennmt/toy_ende.log": Log(
        None,
        (
            Read(11, "train/acc", 4.10, step=100),
            Read(11, "train/ppl", 24633.68),
            Read(11, "train/loss", 10.11),
            Read(11, "lr", 1.0),
            Read(22, "train/loss", 7.07, step=500),
            Read(25, "val/ppl", 1605.39),
            Read(26, "val/acc", 9.05767),
        ),
    ),
    "joeynmt/first_validation.log": Log(
        None,
        (
            Read(3, "train/loss", 3.408352, step=1160, epoch=1),
            Read(3, "lr", 0.000156),
            Read(3, "throughput/tokens_s", 834.0),
            Read(16, "val/loss", 3581.4941, step=1160, epoch=1),
            Read(16, "val/ppl", 1.3005),
        ),
    ),
    "joeynmt/epoch_totals.log": Log(
        None,
        (
            Read(3, "train/loss", 15.628224, step=1000, epoch=6),
            Read(14, "train/loss", 2.603220, step=2000, epoch=11),
            Read(14, "lr", 0.0003),
        ),
    ),
    "joeynmt/third_run.log": Log(
        None,
        (
            Read(8, "train/loss", 41.147419, step=100, epoch=1),
            Read(19, "throughput/tokens_s", 18848.0, step=600),
        ),
    ),
    "xnmt/asean_switchout.log": Log(
        None,
        (
            Read(4, "train/loss", 8.596564, step=23, epoch=0.0509),
            Read(4, "throughput/tokens_s", 5060.50),
            Read(31, "val/loss", 5.904, epoch=1.0),
            Read(62, "val/loss", 5.278, epoch=2.0),
        ),
    ),
    "simple_nmt/rl_baseline.log": Log(
        None,
        (
            Read(67, "train/loss", 4.9263, epoch=1),
            Read(67, "train/ppl", 137.87),
            Read(68, "val/loss", 4.0864, epoch=1),
            Read(68, "val/ppl", 59.52),
        ),
    ),
    "simple_nmt/experiment.log": Log(
        None,
        (
            Read(9, "train/loss", 4.2639, epoch=1),
            Read(10, "val/loss", 3.5788, epoch=1),
            Read(18, "val/ppl", 9.73, epoch=5),
        ),
    ),
    "simple_nmt/dsl.log": Log(
        None,
        (
            Read(13, "train/loss", 4.8761, epoch=1),
            Read(14, "val/ppl", 71.48, epoch=1),
            Read(22, "val/loss", 4.4210, epoch=5),
        ),
    ),
    "marian/sent_valid.log": Log(
        None,
        (
            Read(8, "train/loss", 0.06380463, step=20000, epoch=62),
            Read(8, "throughput/tokens_s", 8082.72),
            Read(8, "grad_norm", 0.6358),
            Read(13, "val/loss", 0.243329, step=20000),
            Read(14, "val/ppl", 1.01706, step=20000),
        ),
    ),
    "marian/muhaung.log": Log(
        None,
        (
            Read(9, "train/loss", 0.00429036, step=60500, epoch=184),
            Read(9, "throughput/tokens_s", 630.91),
            Read(15, "train/loss", 0.00491026, step=61000, epoch=185),
        ),
    ),
    "marian/europarl_resume.log": Log(
        None,
        (
            Read(64, "train/loss", 1.89849293, step=51000, epoch=32),
            Read(64, "lr", 1.6803e-04),
            Read(64, "throughput/tokens_s", 11345.70),
            Read(123, "val/loss", 50.2476, step=55000),
            Read(124, "val/ppl", 5.06924, step=55000),
        ),
    ),
    "marian/wat2021.log": Log(
        None,
        (
            Read(1, "train/loss", 3.95925260, step=7500, epoch=1),
            Read(1, "lr", 1.4063e-04),
            Read(18, "val/loss", 232.129, step=10000),
            Read(19, "val/ppl", 52.1382, step=10000),
        ),
    ),
    "tf_siamese/deep_siamese.log": Log(
        None,
        (
            Read(2, "train/loss", 0.0172597, step=166792),
            Read(2, "train/acc", 0.96875),
            Read(30, "train/loss", 0.0216152, step=166794),
        ),
    ),
    "fasttext/supervised.log": Log(None, (Read(6, "train/loss", 0.178538), Read(6, "lr", 0.0))),
    "fasttext/runtogether.log": Log(
        None, (Read(7, "train/loss", 0.503959), Read(11, "train/loss", 0.250880))
    ),
    "llmc/readme_cpu.log": Log(
        None,
        (
            Read(9, "val/loss", 5.252026),
            Read(10, "train/loss", 5.356189, step=0),
            Read(15, "train/loss", 3.970751, step=39),
            Read(16, "val/loss", 4.107781),
        ),
    ),
    "modded_nanogpt/soap.log": Log(
        None,
        (
            Read(20, "val/loss", 11.0149, step=0),
            Read(21, "train/loss", 11.0091, step=1),
            Read(44, "val/loss", 3.2763, step=6000),
        ),
    ),
    "modded_nanogpt/medium_transfer.log": Log(
        None, (Read(11, "val/loss", 10.8318, step=0), Read(36, "val/loss", 2.9165, step=4740))
    ),
    # record reader (Megatron, fairseq and bracket-anchor records): developed on
    "catboost/insurance_fit.log": Log(
        None,
        (
            Read(9, "train/loss", 0.2987243, step=0),
            Read(12, "train/loss", 0.2662971, step=3),
            Read(31, "train/loss", 0.2591086, step=22),
        ),
    ),
    "lightgbm/info_banner.log": Log(None, ()),  # `[Info]` banners: no value to read
    # ---- printed mappings (developed on) ----
    "trl_grpo/vl_mdi.log": Log(
        None,
        (
            Read(14, "rewards/mc_idx_reward/mean", 0.5750),
            Read(24, "num_tokens", 430669.0),
            Read(29, "train/loss", -0.0447, epoch=0.23),
            Read(29, "grad_norm", 0.3019393980503082),
            Read(29, "lr", 7.906976744186048e-06),
            Read(29, "reward", 1.875),
            Read(29, "entropy", 1.0277012687176466),
            Read(50, "train/loss", -0.0078, epoch=0.47),
            Read(50, "reward", 0.49375),
            Read(50, "completions/clipped_ratio", 0.965625),
            Read(71, "train/loss", 0.0, epoch=0.7),
            Read(71, "num_tokens", 1432250.0),
        ),
    ),
    # tables printed in logs (parsers/table_lines.py)
    "baselines/ppo2_cartpole.log": Log(
        None,
        (  # OpenAI Baselines: one table, its step
            # `misc/total_timesteps`, given at its closing rule
            Read(15, "eprewmean", 23.8, step=2050),
            Read(15, "throughput/samples_s", 1950),
            Read(15, "loss/value_loss", 48.4),
            Read(15, "misc/explained_variance", -0.000784),
        ),
    ),
    "mmseg/binary_faq.log": Log(
        None,
        (  # mmseg's `Summary:` tables (per-class rows: details)
            Read(12, "val/pixel_acc", 100.0),
            Read(12, "val/miou", 80.19),
            Read(12, "val/macc", 100.0),
            Read(25, "val/miou", 0.88),
            Read(25, "val/pixel_acc", 1.77),
        ),
    ),
    # ---- held out (blind) ----
    "xgboost/dermatology.log": Log(
        None,
        (Read(4, "train/mlogloss", 1.54662, step=0), Read(4, "test/mlogloss", 1.57447, step=0)),
    ),
    "xgboost/dermatology_rerun.log": Log(
        None,
        (Read(9, "train/mlogloss", 1.57014, step=0), Read(18, "test/mlogloss", 2.04780, step=9)),
    ),
    "tsetlin/spelling.log": Log(
        None, (Read(4, "train/acc", 0.44, epoch=83), Read(7, "train/acc", 0.47, epoch=84))
    ),
    "tsetlin/spelling_run2.log": Log(
        None, (Read(5, "train/acc", 0.46, epoch=1), Read(14, "train/acc", 0.46, epoch=10))
    ),
    "sklearn_score/knn_polarity.log": Log(
        None, (Read(6, "train/score", 0.63), Read(6, "val/score", 0.51), Read(9, "val/score", 0.5))
    ),
    "cgcnn/aws.log": Log(
        None,
        (
            Read(40, "train/loss", 145.13359, epoch=1),
            Read(40, "val/loss", 70.66399, epoch=1),
            Read(40, "lr", 0.001),
            Read(42, "val/loss", 58.69089, epoch=2),
        ),
    ),
    "painn/dynamofix.log": Log(
        None,
        (
            Read(6, "train/loss", 5396073623079684061681189650432.0, epoch=1),
            Read(7, "val/loss", 27356305369322391008657369202688.0, epoch=1),
        ),
    ),
    "handloop/mri_unet.log": Log(
        None,
        (
            Read(9, "train/loss", 0.838, step=10, epoch=1),
            Read(21, "val/loss", 0.6590334177017212, epoch=1),
            Read(55, "val/loss", 0.2022806785323403, epoch=10),
        ),
    ),
    "sacrebleu/nmt_exp1.log": Log(None, (Read(3, "val/bleu", 18.79), Read(5, "val/bleu", 19.26))),
    "kan_gpt/eval_blocks.log": Log(
        None,
        (
            Read(7, "train/loss", 10.87835, step=0),
            Read(12, "test/loss", 10.46),
            Read(19, "test/loss", 10.4610),
            Read(20, "test/ppl", 1409.5481),
            Read(26, "train/loss", 6.51546, step=100),
        ),
    ),
    "kan_gpt/eval_blocks_late.log": Log(
        None,
        (
            Read(12, "test/loss", 6.6267),
            Read(19, "train/loss", 6.40867, step=300),
            Read(31, "test/loss", 6.5726),
        ),
    ),
    # record reader (Megatron, fairseq and bracket-anchor records): held out
    "speechbrain/meld_train_log.log": Log(
        None,
        (
            Read(1, "train/loss", 2.01, epoch=1),
            Read(1, "val/loss", 2.03),
            Read(1, "lr", 1e-4),
            Read(12, "train/loss", 0.967, epoch=12),
            Read(12, "val/loss", 2.81),
        ),
    ),
    # no longer held out: the `date - name - LEVEL -` prefix rule was written after it failed
    "speechbrain/meld_logger.log": Log(
        None,
        (
            Read(9, "train/loss", 1.79, epoch=1),
            Read(9, "val/loss", 1.83),
            Read(9, "lr", 1e-4),
            Read(24, "train/loss", 1.74, epoch=3),
            Read(40, "val/loss", 1.78, epoch=5),
        ),
    ),
    "speechbrain/meld_f1_train_log.log": Log(
        None,
        (
            Read(1, "train/loss", 2.02, epoch=1),
            Read(1, "val/loss", 1.94),
            Read(4, "train/loss", 1.95, epoch=4),
            Read(4, "lr", 1e-4),
            Read(5, "test/loss", 2.03),
        ),
    ),
    # ---- printed mappings (held out) ----
    "trl_grpo/aokvqa_blind.log": Log(
        None,
        (
            Read(10, "rewards/mc_idx_reward/mean", 0.65),
            Read(25, "train/loss", 0.0751, epoch=0.0),
            Read(25, "grad_norm", 47.75),
            Read(25, "lr", 9.996978851963747e-06),
            Read(25, "reward", 1.75),
            Read(25, "entropy", 0.9559141263365746),
            Read(66, "train/loss", 0.0, epoch=0.0),
            Read(66, "reward", 3.6),
            Read(66, "completions/mean_length", 2.6),
            Read(107, "grad_norm", 404.0, epoch=0.0),
            Read(107, "reward", 2.7),
            Read(107, "reward_std", 0.8485281229019165),
        ),
    ),
    "axolotl/terminal_copy.log": Log(
        None,
        (
            Read(1, "train/loss", 0.2818, epoch=2.99),
            Read(1, "grad_norm", 1.1705524921417236),
            Read(1, "lr", 3.627039259682899e-05),
            Read(5, "val/loss", 1.81522536277771, epoch=3.0),
            Read(8, "train/loss", 0.0932, epoch=3.01),
        ),
    ),
    "hf_trainoutput/phi2_qlora.log": Log(
        None,
        (
            Read(27, "train/loss_run_mean", 1.711106170654297, step=500, epoch=0.81),
            Read(27, "throughput/samples_s", 1.532),
        ),
    ),
    # ---- end of a run, NaN in per-class lists (nnU-Net, pasted in its issue threads) ----
    "nnunet/spine_per_class_nan.log": Log(
        None,
        (  # per-class NaN dice: no NaN finding
            Read(17, "train/loss", 0.2669),
            Read(18, "val/loss", 0.0517),
        ),
    ),
    # its only values are NaN losses (`train_loss nan`): read as the findings they are, since
    # a recall counts a value equal to the reading, which NaN never is
    "nnunet/nan_loss.log": Log(None, (), findings=frozenset({(10, "nan"), (11, "nan")})),
    # tables printed in logs (parsers/table_lines.py), held out while its rules were written;
    # a table is read at its closing rule (docs/parsers.md)
    "spinningup/ppo_cartpole.log": Log(
        None,
        (  # Spinning Up's EpochLogger, two epochs
            Read(22, "AverageEpRet", 22.7, epoch=0),
            Read(22, "LossV", 283),
            Read(22, "Entropy", 0.68),
            Read(22, "KL", 0.0152),
            Read(47, "AverageEpRet", 198, epoch=49),
            Read(47, "LossPi", 1.26e-08),
            Read(47, "ClipFrac", 0.0342),
        ),
    ),
    "gcpnet/eval_tables.log": Log(
        None,
        (  # Lightning's test tables of a Hydra project
            Read(9, "test/loss", 1.8178036212921143),
            Read(9, "test/RMSE", 1.3517177104949951),
            Read(9, "test/PearsonCorrCoef", 0.6116969585418701),
            Read(19, "test/loss", 1.812593936920166),
            Read(37, "test/acc", 0.9873061776161194),
            Read(37, "test/F1", 0.9871618151664734),
            Read(49, "test/loss", 1.8619296550750732),
            Read(49, "test/perplexity/all", 6.061273574829102),
        ),
    ),
    "raytune/apex_status.log": Log(
        None,
        (  # Ray Tune's trial status table (RLlib)
            Read(5, "reward", 48.6403, step=29),
        ),
    ),
}

BLIND = frozenset(
    {
        "xgboost/dermatology.log",
        "xgboost/dermatology_rerun.log",
        "tsetlin/spelling.log",
        "tsetlin/spelling_run2.log",
        "sklearn_score/knn_polarity.log",
        "cgcnn/aws.log",
        "painn/dynamofix.log",
        "handloop/mri_unet.log",
        "sacrebleu/nmt_exp1.log",
        "kan_gpt/eval_blocks.log",
        "kan_gpt/eval_blocks_late.log",
        "speechbrain/meld_train_log.log",
        "speechbrain/meld_f1_train_log.log",
        # printed mappings
        "trl_grpo/aokvqa_blind.log",
        "axolotl/terminal_copy.log",
        "hf_trainoutput/phi2_qlora.log",
        # tables
        "spinningup/ppo_cartpole.log",
        "gcpnet/eval_tables.log",
        "raytune/apex_status.log",
    }
)
"""Logs held out while the generic reader's rules were written (19 of 45)."""
