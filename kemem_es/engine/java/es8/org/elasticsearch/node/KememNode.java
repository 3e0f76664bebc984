/*
 * kemem-es: a loopback-only Elasticsearch development node from the Maven Central jars.
 *
 * Usage: KememNode -basePath DIR -httpPort P -transportPort T -clusterName NAME
 *
 * What this node is NOT: a full distribution. Only the server and the transport-netty4 module
 * (HTTP) are loaded; Painless, analysis-common, mapper-extras, reindex and x-pack are not
 * published to Maven Central and are absent. The node constructor is internal API: this file
 * is compiled against one pinned release per major (see pom-es-*.xml).
 */
package org.elasticsearch.node;

import org.elasticsearch.common.logging.LogConfigurator;
import org.elasticsearch.common.settings.Settings;
import org.elasticsearch.env.Environment;
import org.elasticsearch.plugins.KememPluginsService;
import org.elasticsearch.plugins.PluginsLoader;
import org.elasticsearch.plugins.PluginsService;
import org.elasticsearch.transport.netty4.Netty4Plugin;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public class KememNode extends Node {

    KememNode(Environment environment, PluginsLoader loader) {
        super(NodeConstruction.prepareConstruction(environment, loader, new NodeServiceProvider() {
            @Override
            PluginsService newPluginService(Environment env, PluginsLoader pluginsLoader) {
                return new KememPluginsService(
                    env.settings(), env.configDir(), pluginsLoader, List.of(Netty4Plugin.class)
                );
            }
        }, true));
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i], argv[i + 1]);
        }
        Path base = Path.of(args.getOrDefault("-basePath", "es-node")).toAbsolutePath();
        Path config = base.resolve("config");
        Files.createDirectories(config);
        Settings settings = Settings.builder()
            .put("path.home", base.toString())
            .put("path.data", base.resolve("data").toString())
            .put("path.logs", base.resolve("logs").toString())
            .put("cluster.name", args.getOrDefault("-clusterName", "kemem-local"))
            .put("node.name", "kemem-es-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", args.getOrDefault("-httpPort", "9200"))
            .put("transport.port", args.getOrDefault("-transportPort", "9300"))
            .put("discovery.type", "single-node")
            .put("action.auto_create_index", "false")
            .put("cluster.routing.allocation.disk.threshold_enabled", "false")
            .build();
        LogConfigurator.configureESLogging();
        LogConfigurator.configureWithoutConfig(settings);
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            settings, Map.of(), config, () -> "kemem-es-node"
        );
        PluginsLoader loader = PluginsLoader.createPluginsLoader(Set.of(), Set.of(), Map.of(), false);
        KememNode node = new KememNode(env, loader);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.prepareForClose();
                node.close();
                node.awaitClose(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "kemem-es-node-shutdown"));
        node.start();
        System.out.println("kemem-es node started: http 127.0.0.1:" + args.getOrDefault("-httpPort", "9200"));
        stopped.await();
    }
}
