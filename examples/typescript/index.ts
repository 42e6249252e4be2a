// karpy from TypeScript. `pulumi package add ../../infra` generated the `@pulumi/karpy` SDK from the Python
// component's annotations; the arguments are the same as in Python, camelCased.
import * as pulumi from "@pulumi/pulumi";
import * as aws from "@pulumi/aws";
import * as k8s from "@pulumi/kubernetes";
import * as karpy from "@pulumi/karpy";

const config = new pulumi.Config();
const clusterName = config.require("clusterName");

// Explicit providers, handed to the component: it never builds its own.
const awsProvider = new aws.Provider("aws", { region: aws.config.region });
const k8sProvider = new k8s.Provider("k8s", { kubeconfig: config.get("kubeconfig") || undefined });

const karpenter = new karpy.Karpenter("karpy", {
    clusterName: clusterName,
    queue: { ruleNamePrefix: "karpy-" },
    helm: { values: { settings: { featureGates: { spotToSpotConsolidation: true } } } },
    defaultNodePool: { capacityTypes: ["spot", "on-demand"] },
    tags: { team: "platform" },
}, { providers: [awsProvider, k8sProvider] });

export const controllerRoleArn = karpenter.controllerRoleArn;
export const nodeRoleName = karpenter.nodeRoleName;
export const queueName = karpenter.queueName;
export const imageRef = karpenter.imageRef;
