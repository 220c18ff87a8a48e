# The small MLP classifier that the three training examples share (the model of the seeds' Part 2.2),
# written with JAX's API and meshax's imports. The examples differ only in how they parallelise a
# training step; the data, the initial parameters, the loss and the update are the same, so all three
# print the same loss curve.
import argparse

import meshax as jax
import meshax.numpy as jnp
import numpy as np


def parse_args(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=8, help="training steps")
    parser.add_argument("--batch", type=int, default=64, help="global batch size (a multiple of the device count)")
    parser.add_argument("--width", type=int, default=128, help="hidden width (a multiple of the device count)")
    parser.add_argument("--features", type=int, default=64, help="input features")
    parser.add_argument("--classes", type=int, default=10, help="output classes")
    parser.add_argument("--lr", type=float, default=0.3, help="SGD learning rate")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="save the parameters here (meshax.checkpoint, Orbax's format) and resume from the latest")
    parser.add_argument("--save-every", type=int, default=1, help="steps between checkpoints (with --checkpoint-dir)")
    return parser.parse_args()


def layer_sizes(args):
    return [args.features, args.width, args.width, args.classes]


def init_params(sizes, seed=42):
    """One {'w', 'b'} dict per layer: LeCun-normal weights, zero biases, float32, from a NumPy generator,
    so every process builds the very same values."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((fan_in, fan_out)) * np.sqrt(1.0 / fan_in)
        params.append({"w": w.astype(np.float32), "b": np.zeros(fan_out, np.float32)})
    return params


def make_dataset(steps, batch, features, classes, seed=0):
    """`steps` batches of a learnable toy task: inputs x ~ N(0, 1), labels = argmax of a fixed random
    linear "teacher" applied to x. Returns x (steps, batch, features) float32, labels (steps, batch) int32."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((features, classes))
    x = rng.standard_normal((steps, batch, features)).astype(np.float32)
    labels = np.argmax(x @ teacher, axis=-1).astype(np.int32)
    return x, labels


def predict(params, x, gather=lambda layer: layer):
    """The logits of the MLP. `gather` turns a layer's parameters as stored into the full ones
    (the identity, except for FSDP, where it all-gathers the sharded weights)."""
    *hidden, last = params
    for layer in hidden:
        layer = gather(layer)
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    last = gather(last)
    return x @ last["w"] + last["b"]


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy of integer labels."""
    log_probs = jax.nn.log_softmax(logits)
    one_hot = jax.nn.one_hot(labels, logits.shape[-1])
    return -jnp.mean(jnp.sum(one_hot * log_probs, axis=-1))


def loss_fn(params, x, labels, gather=lambda layer: layer):
    return cross_entropy(predict(params, x, gather), labels)


def sgd(params, grads, lr):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)


def resume(args, params):
    """(checkpoint manager or None, first step to run, parameters): with --checkpoint-dir holding a checkpoint,
    the parameters saved after the most steps, restored onto the layout of `params`, and that step count."""
    if args.checkpoint_dir is None:
        return None, 0, params
    manager = jax.checkpoint.CheckpointManager(args.checkpoint_dir, max_to_keep=2)
    done = manager.latest_step()
    if done is None:
        return manager, 0, params
    if jax.process_index() == 0:
        print(f"resuming after step {done - 1} from {args.checkpoint_dir}", flush=True)
    return manager, done, manager.restore(done, params)


def maybe_save(manager, args, step, params):
    """Save the parameters after `step` (as checkpoint step+1: the number of steps done) every --save-every steps."""
    if manager is not None and (step + 1) % args.save_every == 0:
        manager.save(step + 1, params)


def report(step, loss):
    """One line per step, from process 0 only; the loss as its exact float repr."""
    if jax.process_index() == 0:
        print(f"step {step} loss {float(loss)!r}", flush=True)
