"""A JAX training loop fed by feedmesh, on one host or many.

    python3 python/examples/jax_train.py NODE_ADDR [JOB]

On several hosts (jax.distributed.initialize() first, as for any
multi-host JAX program) every host runs the same script: feedmesh.jax
maps jax.process_index() / jax.process_count() to the job's
consumer_index / num_consumers, so each host reads its own share of each
step. The model is a linear regression of y = 3x + 1 on a range dataset.
Prints the final loss; tested by python/tests (JaxTest) when JAX is
importable.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

import feedmesh
import feedmesh.jax as fmjax

SPEC = {"source": {"range": {"stop": 4096, "split_size": 256}},
        "ops": [{"batch": {"size": 64}}]}


def main(addr, job, client_options=None):
    params = {"w": jnp.zeros(()), "b": jnp.zeros(())}

    @jax.jit
    def step(params, x):
        x = x.astype(jnp.float32) / 4096.0
        y = 3.0 * x + 1.0

        def loss_fn(p):
            return jnp.mean((p["w"] * x + p["b"] - y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        return jax.tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads), loss

    loss = None
    with feedmesh.Client(addr, **(client_options or {})) as client:
        # coordinated=False: a range batched plainly, each host reading a
        # share of its own size (lockstep rounds need a spec that ends in
        # bucket_by_sequence_length).
        it = fmjax.distribute(client, SPEC, job, epochs=20, coordinated=False)
        for batch in fmjax.prefetch_to_device(it, size=2):
            params, loss = step(params, batch["value"])
        it.close()
    print("final loss %.5f, w %.3f, b %.3f" % (float(loss), float(params["w"]), float(params["b"])))
    return float(loss)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "jax-example-%d" % np.random.randint(1 << 30))
