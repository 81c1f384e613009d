/*
 * The twin's stand-in for pyxis (NVIDIA/pyxis v0.24.0), the SPANK plugin the cluster's slurmd-pyxis and
 * login-pyxis images load through the plan's plugstack.conf (an include of every file in /usr/share/pyxis).
 *
 * It registers pyxis's srun/sbatch options with the same names and arguments (pyxis args.c spank_opts), so a
 * rendered job script is parsed exactly as in the cluster, and runs each step on the pod's own root instead of
 * in a container: the twin's pods carry the training environment that the cluster's image carries. What it can
 * check on the node, it checks: the squashfs file of --container-image and the sources of --container-mounts
 * must exist there, or the step fails as pyxis's would (an import error names the file).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1)

static char *image;
static char *mounts;

static int set_image(int val, const char *optarg, int remote)
{
	free(image);
	image = optarg ? strdup(optarg) : NULL;
	return 0;
}

static int set_mounts(int val, const char *optarg, int remote)
{
	free(mounts);
	mounts = optarg ? strdup(optarg) : NULL;
	return 0;
}

static int ignore(int val, const char *optarg, int remote)
{
	return 0;
}

/* name, argument info, usage, has_arg, val, callback: as pyxis args.c declares them. */
struct spank_option spank_options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[pyxis stand-in] container image", 1, 0, set_image },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis stand-in] bind mounts", 1, 0, set_mounts },
	{ "container-workdir", "PATH", "[pyxis stand-in] working directory", 1, 0, ignore },
	{ "container-name", "NAME", "[pyxis stand-in] container name", 1, 0, ignore },
	{ "container-save", "PATH", "[pyxis stand-in] save the container", 1, 0, ignore },
	{ "container-mount-home", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "no-container-mount-home", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-remap-root", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "no-container-remap-root", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-entrypoint", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "no-container-entrypoint", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-entrypoint-log", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-writable", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-readonly", NULL, "[pyxis stand-in]", 0, 0, ignore },
	{ "container-env", "NAME[,NAME...]", "[pyxis stand-in]", 1, 0, ignore },
	{ "container-unshare", "NS[,NS...]", "[pyxis stand-in]", 1, 0, ignore },
	SPANK_OPTIONS_TABLE_END
};

static int missing(const char *what, const char *path)
{
	slurm_error("pyxis stand-in: %s %s is not on this node: %s", what, path, strerror(errno));
	return -1;
}

/* In the step, as the user, before the task starts: what pyxis would import and mount must be here. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	struct stat st;
	char *copy, *item, *save = NULL;

	if (image && (image[0] == '/' || image[0] == '.')) {
		if (stat(image, &st) != 0)
			return missing("container image", image);
		if (!S_ISREG(st.st_mode) || st.st_size == 0) {
			slurm_error("pyxis stand-in: container image %s is not a squashfs file", image);
			return -1;
		}
	}
	if (!mounts)
		return 0;
	copy = strdup(mounts);
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(item, ':');
		if (colon)
			*colon = '\0';
		if (stat(item, &st) != 0) {
			int rc = missing("mount source", item);
			free(copy);
			return rc;
		}
	}
	free(copy);
	return 0;
}
